from functools import partial

from ...knobs import Knob
from ..weights import parse_weights

COMPONENT = "nginx-proxy"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
MAX_WEIGHT = 100
CACHING = "acts only with nginx-proxy.cache on"


def weights_problem(text: str) -> str | None:
    """Why a `weights` value is not a comma-separated list of whole numbers from 1 to
    MAX_WEIGHT, or None; how many it holds is checked against the backends at render."""
    if not text or parse_weights(text, MAX_WEIGHT) is not None:
        return None
    return f"must be whole numbers 1..{MAX_WEIGHT} separated by commas, not {text!r}"


KNOBS = [
    knob("worker_processes", int, 1, "Worker processes (0 = auto, one per core).",
         min=0, max=64),
    knob("worker_connections", int, 1024, "Connections each worker may hold open, client "
         "and backend sides together (a proxied request holds two).", min=16, max=65536),
    knob("keepalive_timeout", int, 65, "Seconds an idle client keep-alive connection stays "
         "open (0 disables keep-alive).", min=0, max=3600, unit="s"),
    knob("access_log", bool, True, "Write an access log (in the run directory; the "
         "counters' own log is always written)."),
    knob("balance", str, "round_robin", "How requests are spread over the backends: "
         "round_robin (weighted) or least_conn (fewest active connections).",
         choices=("round_robin", "least_conn"), source="S1"),
    knob("weights", str, "", "Backend weights as \"1,2,1\", one per backend (empty = "
         "equal).", validate=weights_problem),
    knob("upstream_keepalive", int, 0, "Idle connections each worker keeps open to the "
         "backends (0 = a new HTTP/1.0 connection per request, nginx's default; > 0 = "
         "HTTP/1.1 with keep-alive).", min=0, max=4096),
    knob("static", str, "none", "none: proxy every request; files: serve the docroot's "
         "files itself, passing only *.php, *.pl, what is not a file and /_stacklab/ to "
         "the backends (S1's nginx for static, Apache for dynamic).",
         choices=("none", "files"), source="S1"),
    knob("cache", bool, False, "Cache the backends' responses on disk (proxy_cache); off = "
         "pure pass-through.", source="S1"),
    knob("cache_zone_mb", int, 10, "Shared memory for the cache's keys (keys_zone; 1 MB "
         "holds about 8000 keys).", min=1, max=4096, acts_with={"cache": True},
         inert_why=CACHING, unit="MB"),
    knob("cache_max_mb", int, 1024, "Most the cache holds on disk, in the run directory "
         "(max_size; the cache manager evicts the least recently used).", min=1,
         max=1_048_576, acts_with={"cache": True}, inert_why=CACHING, unit="MB"),
    # Not nginx's 0 (no proxy_cache_valid): the stacks behind send no expiry by default,
    # so the cache would keep nothing.
    knob("cache_valid_s", int, 60, "Seconds a 200 response is cached when the backend's "
         "headers do not say (proxy_cache_valid; 0 = only what its Expires/Cache-Control "
         "allow).", min=0, max=31_536_000, acts_with={"cache": True}, inert_why=CACHING,
         unit="s"),
    knob("cache_lock", bool, False, "One request at a time fills a missing cache entry; "
         "the others wait for it (proxy_cache_lock).", acts_with={"cache": True},
         inert_why=CACHING),
]
