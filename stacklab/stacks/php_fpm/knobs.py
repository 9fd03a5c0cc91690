from ...knobs import Knob

C = "php-fpm"
DYNAMIC = {"pm": "dynamic"}
KNOBS = [
    Knob(C, "pm", str, "dynamic", "Process manager: static (fixed pool), dynamic (spares "
         "between min and max), ondemand (forked per need).",
         choices=("static", "dynamic", "ondemand"), source="S5"),
    Knob(C, "max_children", int, 8, "pm.max_children: most PHP workers at once.", min=1,
         max=1024, source="S5"),
    Knob(C, "start_servers", int, 2, "pm.start_servers (dynamic).", min=1, max=1024,
         acts_with=DYNAMIC),
    Knob(C, "min_spare_servers", int, 1, "pm.min_spare_servers (dynamic).", min=1, max=1024,
         acts_with=DYNAMIC),
    Knob(C, "max_spare_servers", int, 3, "pm.max_spare_servers (dynamic).", min=1, max=1024,
         acts_with=DYNAMIC),
    Knob(C, "max_requests", int, 0, "pm.max_requests: requests before a worker is replaced "
         "(0 = never).", min=0, max=10_000_000),
    Knob(C, "listen", str, "unix", "Where FastCGI listens: a unix socket or loopback TCP.",
         choices=("unix", "tcp"), source="S5"),
    Knob(C, "listen_backlog", int, 511, "listen.backlog of the FastCGI socket.", min=1,
         max=65535),
]
