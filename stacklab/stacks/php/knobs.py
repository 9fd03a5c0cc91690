from functools import partial

from ...knobs import Knob
from .. import includewrites
from ..userconf import include_knob
from .ini import check_extra

COMPONENT = "php"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
OPCACHE_ON = "acts only with OPcache on (php.opcache and php.opcache_enable true)"
KNOBS = [
    knob("opcache", bool, True, "OPcache: keep compiled scripts in shared memory "
         "(today's successor of APC/eAccelerator/XCache). false: the extension is not "
         "loaded at all.", source="S1, S5"),
    knob("opcache_enable", bool, True, "opcache.enable with the extension loaded "
         "(php.opcache = true): false loads OPcache but leaves it off, which is not the "
         "same as not loading it (its hooks stay in every request).", source="S1, S5",
         acts_with={"opcache": True},
         inert_why="acts only with the extension loaded (php.opcache = true)"),
    knob("opcache_memory_mb", int, 128, "opcache.memory_consumption in MB.", min=8,
         max=4096, source="S1", acts_with={"opcache": True, "opcache_enable": True},
         inert_why=OPCACHE_ON, unit="MB"),
    knob("opcache_validate_timestamps", bool, True, "Check scripts' mtimes for changes "
         "(off: never recompile until restart).", source="S1",
         acts_with={"opcache": True, "opcache_enable": True}, inert_why=OPCACHE_ON,
         caution="off means edited scripts are not seen until restart"),
    knob("apcu", bool, False, "Load APCu, the user data cache (APC's successor).",
         source="S1"),
    knob("extensions", str, "default", "default: every installed shared extension "
         "(Debian's set); minimal: only those the knobs ask for.", choices=("default", "minimal"),
         source="S1"),
    knob("expose_php", bool, False, "Send X-Powered-By: PHP/… (Off in Debian's "
         "php.ini).", source="S1"),
    knob("register_argc_argv", bool, False, "Build $argv/$argc for every request.",
         source="S1"),
    knob("realpath_cache_size_kb", int, 4096, "realpath cache size in KiB.", min=0,
         max=1048576, source="S1", unit="KiB"),
    knob("session_auto_start", bool, False, "Start a session on every request.",
         source="S5", caution="starts a session (a file lock and a write) on every request, "
         "even for pages that never use it"),
    knob("zlib_output_compression", bool, False, "PHP compresses its own output "
         "(zlib.output_compression).", source="S2"),
    knob("session_gc_probability", int, 0, "session.gc_probability out of Debian's "
         "gc_divisor 1000: the chance that a session start scans the session store for "
         "expired sessions. Debian: 0, cleaned by cron instead; PHP's built-in default is "
         "1 of 100 (10 here), which with file sessions makes every hundredth request read "
         "a directory that grows by every session.", min=0, max=1000, source="S3",
         acts_with={"session_handler": "files"},
         inert_why="memcached expires sessions itself (php.session_handler = {value!r})"),
    knob("session_handler", str, "files", "Where sessions live: files (one file per "
         "session) or memcached (needs a stack with memcached).",
         choices=("files", "memcached"), source="S3"),
    knob("session_dir", str, "run", "Where file sessions are written: run (the run "
         "directory's sessions/) or nested (a directory four levels deeper, as Debian's "
         "/var/lib/php/sessions): S3 moved the session files to another path.",
         choices=("run", "nested"), source="S3", acts_with={"session_handler": "files"},
         inert_why="sessions are in memcached (php.session_handler = {value!r})"),
    include_knob(COMPONENT, "ini_extra", "A file of your own php.ini directives (relative "
                 "to the experiment file), read after stacklab's php.ini by every handler "
                 "(mod_php, PHP-FPM, FastCGI, CGI: conf.d, scanned last); its values win; "
                 "\"\" = none.", check_extra,
                 includewrites.ini(includewrites.PHP_WRITES)),
]

