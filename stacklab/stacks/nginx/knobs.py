from ...knobs import Knob

C = "nginx"
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
    Knob(C, "tcp_nopush", bool, False, "TCP_CORK headers with sendfile (needs sendfile on)."),
    Knob(C, "access_log", bool, True, "Write an access log (in the run directory).",
         source="S1"),
]
