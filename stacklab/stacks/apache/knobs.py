from ...knobs import Knob

C = "apache"
KNOBS = [
    Knob(C, "mpm", str, "event", "Multi-processing module.", choices=("event",),
         source="S1, S5"),
    Knob(C, "start_servers", int, 2, "Child processes created at start.", min=1, max=64,
         source="S1"),
    Knob(C, "threads_per_child", int, 25, "Threads in each child process.", min=1, max=256),
    Knob(C, "max_request_workers", int, 150, "Simultaneous requests served (threads in all).",
         min=1, max=4096),
    Knob(C, "keepalive", bool, True, "Keep connections open between requests.",
         source="S1, S5"),
    Knob(C, "keepalive_timeout", int, 5, "Seconds an idle keep-alive connection stays open.",
         min=1, max=3600, source="S1"),
    Knob(C, "max_keepalive_requests", int, 1000, "Requests over one keep-alive connection "
         "(0 = unlimited).", min=0, max=10_000_000, source="S5"),
    Knob(C, "enable_sendfile", bool, False, "EnableSendfile: serve files with sendfile(2).",
         source="S1"),
    Knob(C, "access_log", bool, True, "Write an access log (in the run directory).",
         source="S1"),
]
