from ...knobs import Knob

C = "php"
KNOBS = [
    Knob(C, "opcache", bool, True, "OPcache: keep compiled scripts in shared memory "
         "(today's successor of APC/eAccelerator/XCache).", source="S1, S5"),
    Knob(C, "opcache_memory_mb", int, 128, "opcache.memory_consumption in MB.", min=8,
         max=4096, source="S1"),
    Knob(C, "opcache_validate_timestamps", bool, True, "Check scripts' mtimes for changes "
         "(off: never recompile until restart).", source="S1"),
    Knob(C, "apcu", bool, False, "Load APCu, the user data cache (APC's successor).",
         source="S1"),
    Knob(C, "extensions", str, "default", "default: every installed shared extension "
         "(Debian's set); minimal: only those the knobs ask for.", choices=("default", "minimal"),
         source="S1"),
    Knob(C, "expose_php", bool, True, "Send X-Powered-By: PHP/….", source="S1"),
    Knob(C, "register_argc_argv", bool, False, "Build $argv/$argc for every request.",
         source="S1"),
    Knob(C, "realpath_cache_size_kb", int, 4096, "realpath cache size in KiB.", min=0,
         max=1048576, source="S1"),
    Knob(C, "session_auto_start", bool, False, "Start a session on every request.",
         source="S5"),
    Knob(C, "zlib_output_compression", bool, False, "PHP compresses its own output "
         "(zlib.output_compression).", source="S2"),
    Knob(C, "session_handler", str, "files", "Where sessions live: files (one file per "
         "session) or memcached (needs a stack with memcached).",
         choices=("files", "memcached"), source="S3"),
]
