from functools import partial

from ...errors import StackError
from ...knobs import Knob
from ..weights import parse_weights, weights_for as shared_weights_for

COMPONENT = "haproxy"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
MAX_WEIGHT = 256                  # a server's weight in HAProxy: 0..256 (0 drains it)


def weights_problem(text: str) -> str | None:
    """Why a `weights` value is not a comma-separated list of whole numbers 1..256, or
    None. How many it holds is checked against the backends when the config is rendered:
    a knob's value alone does not know them. 0 (a drained server) is refused: a replica
    that gets no request is not part of the stack measured."""
    if not text or parse_weights(text, MAX_WEIGHT) is not None:
        return None
    return f"weights {text!r} must be whole numbers 1..{MAX_WEIGHT} separated by commas"


def weights_for(text: str, backends: int) -> tuple[int, ...]:
    """Each backend's weight (empty: all 1), or a StackError naming the knob."""
    if problem := weights_problem(text):
        raise StackError(f"{COMPONENT}.weights: {problem}")
    return tuple(shared_weights_for(COMPONENT, text, backends, MAX_WEIGHT))


KNOBS = [
    knob("balance", str, "roundrobin", "How requests are spread over the backends: "
         "roundrobin (weighted, HAProxy's default), static-rr (weighted, fixed order) or "
         "leastconn (fewest active connections; idle backends take turns).",
         choices=("roundrobin", "static-rr", "leastconn"), source="S2"),
    knob("weights", str, "", "Backend weights as \"1,2,1\", one per backend in order "
         "(empty = equal).", validate=weights_problem, source="S2"),
    knob("http_mode", str, "keep-alive", "Connections kept open: keep-alive (clients and "
         "backends, HAProxy's default), server-close (clients only: a new backend "
         "connection per request) or close (neither).",
         choices=("keep-alive", "server-close", "close"), source="S2"),
    knob("maxconn", int, 4096, "Client connections held at once (global maxconn, which "
         "the frontend inherits); more wait in the listen queue. Set, not derived from "
         "ulimit -n as HAProxy would, so that a run does not depend on the shell.",
         min=1, max=1_000_000),
    knob("nbthread", int, 1, "Threads of the worker process (HAProxy's default is one per "
         "CPU; 1 here, where 2 cores are shared with the stack behind and the load).",
         min=1, max=64),
    knob("server_maxconn", int, 0, "Requests sent to each backend at once (server "
         "maxconn); more wait in HAProxy's queue. 0 = no limit.", min=0, max=1_000_000),
]
