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

COMPONENT = "apache"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
# Knobs that act only under some MPMs (ITK runs on top of prefork).
PROCESSES = {"mpm": ("prefork", "itk")}
THREADS = {"mpm": ("worker", "event")}
UNDER_PROCESSES = "acts only under the prefork or itk MPM, not apache.mpm = {value!r}"
UNDER_THREADS = "acts only under the worker or event MPM, not apache.mpm = {value!r}"
# mod_http2 and prefork (or itk on top of it), Apache 2.4.71 here: it starts, logs
# AH10034 ("not supported … HTTP/2 will be inactive"), chooses http/1.1 by ALPN (every
# h2 request of a run failed) and yet answered h2c by prior knowledge (14,271 req/s at
# c=8, unsupported). Refused there (Apache.check), never silently inert.
HTTP2_MPM = ("mod_http2 does not support the prefork MPM (nor itk on top of it): Apache "
             "logs AH10034 and over TLS chooses http/1.1 by ALPN (h2 inactive); "
             "apache.mpm = 'event' or 'worker'")
KNOBS = [
    knob("mpm", str, "event", "Multi-processing module: prefork (processes), worker "
         "(threads), event (threads, idle keep-alive off the workers), itk (prefork with a "
         "user per vhost; libapache2-mpm-itk).", choices=("prefork", "worker", "event", "itk"),
         source="S1, S5"),
    knob("start_servers", int, 0, "StartServers: child processes created at start (0 = "
         "Debian's default for the MPM: 5 for prefork/itk, 2 for worker/event).",
         min=0, max=1024, source="S1"),
    knob("min_spare_servers", int, 5, "MinSpareServers (prefork, itk).", min=1, max=1024,
         source="S1", acts_with=PROCESSES, inert_why=UNDER_PROCESSES),
    knob("max_spare_servers", int, 10, "MaxSpareServers (prefork, itk).", min=1, max=4096,
         source="S1", acts_with=PROCESSES, inert_why=UNDER_PROCESSES),
    knob("threads_per_child", int, 25, "ThreadsPerChild (worker, event).", min=1, max=1024,
         acts_with=THREADS, inert_why=UNDER_THREADS),
    knob("min_spare_threads", int, 25, "MinSpareThreads (worker, event).", min=1,
         max=65536, acts_with=THREADS, inert_why=UNDER_THREADS),
    knob("max_spare_threads", int, 75, "MaxSpareThreads (worker, event).", min=1,
         max=65536, acts_with=THREADS, inert_why=UNDER_THREADS),
    knob("max_request_workers", int, 150, "MaxRequestWorkers: requests served at once "
         "(processes for prefork/itk, threads in all for worker/event).", min=1, max=20000,
         source="S5"),
    knob("max_connections_per_child", int, 0, "MaxConnectionsPerChild (0 = unlimited).",
         min=0, max=10_000_000),
    knob("keepalive", bool, True, "KeepAlive: keep connections open between requests.",
         source="S1, S5"),
    knob("keepalive_timeout", int, 5, "KeepAliveTimeout in seconds.", min=1, max=3600,
         source="S1", acts_with={"keepalive": True}, unit="s"),
    knob("max_keepalive_requests", int, 100, "MaxKeepAliveRequests (0 = unlimited).",
         min=0, max=10_000_000, source="S5", acts_with={"keepalive": True}),
    knob("enable_sendfile", bool, False, "EnableSendfile: serve files with sendfile(2).",
         source="S1"),
    knob("enable_mmap", bool, True, "EnableMMAP: read files through mmap.", source="S1"),
    knob("hostname_lookups", bool, False, "HostnameLookups: reverse-DNS every client.",
         source="S1", caution="a reverse DNS lookup per client; slow with a real resolver"),
    knob("allow_override", str, "none", "AllowOverride None (no .htaccess lookups) or All "
         "(.htaccess read in every directory of the path; the docroot has them).",
         choices=("none", "all"), source="S1",
         caution="with All, Apache looks for .htaccess in every directory of every path"),
    knob("symlinks", str, "follow", "Options FollowSymLinks (no checks) or "
         "SymLinksIfOwnerMatch (an lstat per path component).",
         choices=("follow", "if_owner_match"), source="S1"),
    knob("directory_index", str, "html_first", "DirectoryIndex order: index.html first or "
         "index.php first.", choices=("html_first", "php_first"), source="S1"),
    knob("access_log", bool, True, "Write an access log (in the run directory).",
         source="S1"),
    knob("modules", str, "minimal", "Module set: minimal (what the stack needs) or debian "
         "(Debian's default enabled set besides).", choices=("minimal", "debian"),
         source="S1"),
    knob("deflate", bool, False, "mod_deflate: gzip text responses.", source="S1, S2"),
    knob("precompressed", bool, False, "Serve the precompressed file.gz beside a text "
         "file (every workload writes gzip -9 copies) to clients that accept gzip: "
         "mod_rewrite picks the .gz, mod_mime labels it (AddEncoding gzip), mod_headers adds "
         "Vary; nothing is compressed on the fly (nginx's gzip_static).", source="S2"),
    knob("deflate_level", int, 6, "DeflateCompressionLevel 1 (fast) to 9 (small); acts "
         "only with apache.deflate on.", min=1,
         max=9, source="S2", acts_with={"deflate": True}),
    expires_knob(COMPONENT, "mod_expires: max-age for every response."),
    knob("listen_backlog", int, 511, "ListenBacklog.", min=1, max=65535),
    nofile_knob(COMPONENT, "Open-files limit of the server processes (0 = inherit)."),
    knob("extended_status", bool, False, "ExtendedStatus: mod_status keeps per-request "
         "figures (a clock read per request) and counts requests and bytes (Total "
         "Accesses, Total kBytes: Apache's counters in stacklab). Off here; Debian's "
         "status.conf turns it on."),
    knob("php_handler", str, "none", "How .php runs: none, mod_php (in the Apache "
         "process; prefork only), fpm (proxy_fcgi to PHP-FPM), fcgid (mod_fcgid managing "
         "php-cgi), cgi (php-cgi started per request); set by the stack.",
         choices=("none", "mod_php", "fpm", "fcgid", "cgi"), source="S1, S5"),
    knob("perl_handler", str, "none", "How .pl runs: none, cgi (perl started per request), "
         "registry (mod_perl ModPerl::Registry: compiled once per process), perlrun "
         "(ModPerl::PerlRun: compiled every request); set by the stack.",
         choices=("none", "cgi", "registry", "perlrun"), source="S2"),
    *map(described, tls_knobs(COMPONENT)),
    http2_knob(COMPONENT, meaning="HTTP/2 by mod_http2 (off is Debian's default): with "
               "tls on, Protocols h2 http/1.1 (over TLS, chosen by ALPN); with tls off, "
               "Protocols h2c http/1.1 and H2Direct on (cleartext by prior knowledge, "
               "beside HTTP/1.1). Worker or event MPM only: mod_http2 does not support "
               "prefork or itk (AH10034), so it is refused there. Asked by load.protocol = "
               "'h2' or 'h2c'.",
               acts_with=THREADS, inert_why=UNDER_THREADS + " (" + HTTP2_MPM + ")"),
    include_knob(COMPONENT, "include", "A file of your own Apache directives (relative to "
                 "the experiment file), included verbatim at the end of httpd.conf, after "
                 "stacklab's, under every MPM and handler; \"\" = none. A later directive "
                 "wins in Apache's main config; LoadModule the modules it needs.",
                 check_file, includewrites.apache),
]
