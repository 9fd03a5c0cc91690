from functools import partial

from ...knobs import Knob

COMPONENT = "php-fpm"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
DYNAMIC = {"pm": "dynamic"}
KNOBS = [
    knob("pm", str, "dynamic", "Process manager: static (fixed pool), dynamic (spares "
         "between min and max), ondemand (forked per need).",
         choices=("static", "dynamic", "ondemand"), source="S5"),
    knob("max_children", int, 8, "pm.max_children: most PHP workers at once.", min=1,
         max=1024, source="S5"),
    knob("start_servers", int, 2, "pm.start_servers (dynamic).", min=1, max=1024,
         acts_with=DYNAMIC),
    knob("min_spare_servers", int, 1, "pm.min_spare_servers (dynamic).", min=1, max=1024,
         acts_with=DYNAMIC),
    knob("max_spare_servers", int, 3, "pm.max_spare_servers (dynamic).", min=1, max=1024,
         acts_with=DYNAMIC),
    knob("max_requests", int, 0, "pm.max_requests: requests before a worker is replaced "
         "(0 = never).", min=0, max=10_000_000),
    knob("listen", str, "unix", "Where FastCGI listens: a unix socket or loopback TCP.",
         choices=("unix", "tcp"), source="S5"),
    knob("listen_backlog", int, 0, "listen.backlog of the FastCGI socket (0 = PHP-FPM's "
         "default on Linux, as Debian's www.conf leaves it: -1, the kernel's "
         "net.core.somaxconn). Connects beyond max_children plus this backlog are refused "
         "at once on a unix socket (nginx answers 502) and wait for SYN retransmits on TCP.",
         min=0, max=65535),
]
