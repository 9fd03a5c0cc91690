from ...knobs import Knob
from ..expires import expires_knob
from ..limits import nofile_knob
from ..tls import tls_knobs
from ..tlsrules import described

C = "nginx"
ON_THE_FLY = "acts only with nginx.gzip on (compression on the fly)"
KNOBS = [
    Knob(C, "worker_processes", int, 1, "Worker processes (0 = auto, one per core).",
         min=0, max=64, source="S1, S5"),
    Knob(C, "worker_connections", int, 1024, "Connections each worker may hold open.",
         min=16, max=65536),
    Knob(C, "keepalive_timeout", int, 65, "Seconds an idle keep-alive connection stays open "
         "(0 disables keep-alive).", min=0, max=3600, source="S1, S5"),
    Knob(C, "keepalive_requests", int, 1000, "Requests served over one keep-alive connection.",
         min=1, max=10_000_000),
    Knob(C, "sendfile", bool, False, "Serve files with sendfile(2). Off by default here: on "
         "loopback it is slower on tiny files.", source="S1"),
    Knob(C, "tcp_nopush", bool, False, "TCP_CORK headers with sendfile (acts only with "
         "nginx.sendfile on).", acts_with={"sendfile": True}),
    Knob(C, "open_file_cache", int, 0, "Cache open file descriptors and metadata for this "
         "many files (0 = off).", min=0, max=1_000_000, source="S1"),
    Knob(C, "access_log", bool, True, "Write an access log (in the run directory).",
         source="S1"),
    Knob(C, "gzip", bool, False, "Compress responses with gzip (mod_deflate's counterpart).",
         source="S2"),
    Knob(C, "gzip_comp_level", int, 1, "gzip level 1 (fast) to 9 (small).", min=1, max=9,
         source="S2", acts_with={"gzip": True}, inert_why=ON_THE_FLY),
    Knob(C, "gzip_static", bool, False, "Serve the precompressed file.gz beside a file "
         "(every workload writes gzip -9 copies of its text files) to clients that accept "
         "gzip, instead of compressing on the fly (gzip_static, with Vary).", source="S2"),
    Knob(C, "gzip_types", str, "text", "Types compressed: text (HTML, CSS, JS, JSON, plain) "
         "or all (also images).", choices=("text", "all"), source="S2",
         acts_with={"gzip": True}, inert_why=ON_THE_FLY),
    expires_knob(C, "Expires/Cache-Control max-age for every response."),
    Knob(C, "listen_backlog", int, 511, "listen backlog of the server socket.", min=1,
         max=65535),
    nofile_knob(C, "worker_rlimit_nofile: open files per worker (0 = inherit)."),
    Knob(C, "php", str, "none", "Where .php goes: none (served as files) or fpm (FastCGI to "
         "PHP-FPM); set by the stack.", choices=("none", "fpm")),
    *map(described, tls_knobs(C)),
]
