from functools import partial

from ...knobs import Knob
from ..expires import expires_knob
from ..http2 import http2_knob
from ..limits import nofile_knob
from ..tls import tls_knobs
from ..tlsrules import described
from .. import includewrites
from ..userconf import include_knob
from .configtest import check_file

COMPONENT = "nginx"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
ON_THE_FLY = "acts only with nginx.gzip on (compression on the fly)"
KNOBS = [
    knob("worker_processes", int, 1, "Worker processes (0 = auto, one per core).",
         min=0, max=64, source="S1, S5"),
    knob("worker_connections", int, 1024, "Connections each worker may hold open.",
         min=16, max=65536),
    knob("keepalive_timeout", int, 65, "Seconds an idle keep-alive connection stays open "
         "(0 disables keep-alive).", min=0, max=3600, source="S1, S5", unit="s"),
    knob("keepalive_requests", int, 1000, "Requests served over one keep-alive connection.",
         min=1, max=10_000_000),
    # On with tcp_nopush, as Debian's nginx.conf ships them. Off, nginx copies each file
    # through 32 KB buffers: on loopback it served S1's photos (~323 KB) at half the rate
    # (c = 10: 9,200 against 19,100 req/s) and the 3 KB page 13% faster (76,000 against
    # 67,300); sendfile without tcp_nopush loses a third on the 3 KB page.
    knob("sendfile", bool, True, "Serve files with sendfile(2) (Debian's default). On "
         "loopback: twice the rate on ~300 KB photos, ~12% less on a 3 KB page.",
         source="S1"),
    knob("tcp_nopush", bool, True, "TCP_CORK: headers and the file's start in one segment "
         "with sendfile (Debian's default; acts only with nginx.sendfile on).",
         acts_with={"sendfile": True}),
    knob("open_file_cache", int, 0, "Cache open file descriptors and metadata for this "
         "many files (0 = off).", min=0, max=1_000_000, source="S1"),
    knob("access_log", bool, True, "Write an access log (in the run directory).",
         source="S1"),
    knob("gzip", bool, False, "Compress responses with gzip (mod_deflate's counterpart).",
         source="S2"),
    knob("gzip_comp_level", int, 1, "gzip level 1 (fast) to 9 (small).", min=1, max=9,
         source="S2", acts_with={"gzip": True}, inert_why=ON_THE_FLY),
    knob("gzip_static", bool, False, "Serve the precompressed file.gz beside a file "
         "(every workload writes gzip -9 copies of its text files) to clients that accept "
         "gzip, instead of compressing on the fly (gzip_static, with Vary).", source="S2"),
    knob("gzip_types", str, "text", "Types compressed: text (HTML, CSS, JS, JSON, plain) "
         "or all (also images).", choices=("text", "all"), source="S2",
         acts_with={"gzip": True}, inert_why=ON_THE_FLY),
    expires_knob(COMPONENT, "Expires/Cache-Control max-age for every response."),
    knob("listen_backlog", int, 511, "listen backlog of the server socket.", min=1,
         max=65535),
    nofile_knob(COMPONENT, "worker_rlimit_nofile: open files per worker (0 = inherit)."),
    knob("php", str, "none", "Where .php goes: none (served as files) or fpm (FastCGI to "
         "PHP-FPM); set by the stack.", choices=("none", "fpm")),
    *map(described, tls_knobs(COMPONENT)),
    http2_knob(COMPONENT, meaning="HTTP/2 (listen … http2; off is Debian's default): with "
               "tls on, over TLS chosen by ALPN (h2, beside HTTP/1.1); with tls off, the "
               "port takes cleartext HTTP/2 by prior knowledge only (h2c: nginx 1.22 "
               "answers no HTTP/1.1 there; stacklab's checks use a unix socket of the same "
               "server). Asked by load.protocol = 'h2' or 'h2c'."),
    include_knob(COMPONENT, "include", "A file of your own nginx directives (relative to "
                 "the experiment file), included verbatim at the end of the server block, "
                 "after stacklab's; \"\" = none. nginx refuses a directive the block "
                 "already has (root, listen…): no later-one-wins.", check_file,
                 includewrites.nginx),
]
