from functools import partial

from dataclasses import replace

from ...knobs import Knob
from ..limits import nofile_knob
from ..http2 import http2_knob
from ..tls import tls_knobs
from ..tlsrules import described

COMPONENT = "lighttpd"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component


def _lighttpd_tls(knob: Knob) -> Knob:
    """lighttpd 1.4.69 has no server-side session cache (it warns "unknown config-key:
    ssl.session-cache (ignored)"): it resumes by session tickets only."""
    if knob.name != "tls_session_cache":
        return knob
    return replace(knob, default=False, choices=(False,),
                   meaning="Server-side TLS session cache: lighttpd 1.4.69 has none "
                   "(ssl.session-cache is ignored), so only false; resumption is by tickets.")

KNOBS = [
    knob("max_worker", int, 0, "server.max-worker: processes forked to serve requests "
         "(0 = one event-driven process, lighttpd's own design).", min=0, max=64,
         source="S1, S4"),
    knob("max_keep_alive_requests", int, 1000, "server.max-keep-alive-requests: requests "
         "over one keep-alive connection (0 disables keep-alive).", min=0, max=10_000_000,
         source="S2"),
    knob("max_keep_alive_idle", int, 5, "server.max-keep-alive-idle: seconds an idle "
         "keep-alive connection stays open.", min=1, max=3600, source="S2", unit="s"),
    knob("stat_cache", bool, True, "server.stat-cache-engine: cache file metadata "
         "(simple) or stat every request (disable).", source="S1"),
    knob("access_log", bool, True, "Write an access log (mod_accesslog, in the run "
         "directory).", source="S1"),
    knob("deflate", bool, False, "Compress responses with gzip (mod_deflate; compressed "
         "static files cached in the run directory).", source="S2, S4"),
    knob("deflate_level", int, 1, "deflate.compression-level: gzip level 1 (fast) to 9 "
         "(small).", min=1, max=9, source="S2", acts_with={"deflate": True}),
    knob("listen_backlog", int, 1024, "server.listen-backlog: listen backlog of the "
         "server socket.", min=1, max=65535),
    nofile_knob(COMPONENT, "server.max-fds: open files of the server (0 = inherit)."),
    knob("php", str, "none", "Where .php goes: none (served as files) or fpm (mod_fastcgi "
         "to PHP-FPM); set by the stack.", choices=("none", "fpm"), source="S1, S4"),
    *(_lighttpd_tls(described(k)) for k in tls_knobs(COMPONENT)),
    # On by default: lighttpd enables HTTP/2 itself since 1.4.59 (1.4.69 has it built
    # in, no mod_h2 to load) and Debian's lighttpd.conf does not turn it off.
    http2_knob(COMPONENT, True, "HTTP/2 (server.feature-flags server.h2proto and "
               "server.h2c; on is lighttpd's own default): with tls on, over TLS chosen by "
               "ALPN (h2, beside HTTP/1.1); with tls off, cleartext by prior knowledge (h2c, "
               "beside HTTP/1.1). Asked by load.protocol = 'h2' or 'h2c'."),
]
