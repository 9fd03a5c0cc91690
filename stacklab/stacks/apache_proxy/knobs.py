"""apache-proxy's knobs: the event MPM's size, how it talks to the backends, mod_cache."""

from functools import partial

from ...errors import StackError
from ...knobs import Knob
from ..weights import parse_weights
from ..limits import nofile_knob

COMPONENT = "apache-proxy"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
CACHING = {"cache": ("disk", "socache")}
ONLY_CACHING = "acts only with a cache (apache-proxy.cache disk or socache), not {value!r}"
LOADFACTOR_MAX = 100   # mod_proxy_balancer's loadfactor range is 1-100


def weights_problem(text: str) -> str | None:
    """Why a `weights` value is not a list of loadfactors ("1,2,1"), or None."""
    # No spaces: the value is written into the config as it is given.
    if not text or (text == "".join(text.split())
                    and parse_weights(text, LOADFACTOR_MAX) is not None):
        return None
    return (f"{text!r} is not comma-separated loadfactors from 1 to {LOADFACTOR_MAX}, "
            "one per backend (e.g. \"1,2,1\")")


def loadfactors(weights: str, backends: int) -> list[int]:
    """Each backend's loadfactor from a valid `weights` value (empty: all 1); a
    StackError naming the knob when it does not give one per backend."""
    factors = [int(w) for w in weights.split(",")] if weights else [1] * backends
    if len(factors) != backends:
        raise StackError(f"{COMPONENT}.weights = {weights!r} gives {len(factors)} "
                         f"loadfactors for {backends} backends")
    return factors


KNOBS = [
    knob("threads_per_child", int, 25, "ThreadsPerChild of the event MPM: threads in each "
         "child process (Debian's 25).", min=1, max=1024),
    knob("max_request_workers", int, 150, "MaxRequestWorkers: requests in progress at once, "
         "threads over all children (Debian's 150).", min=1, max=20000),
    knob("keepalive", bool, True, "KeepAlive: keep client connections open between "
         "requests.", source="S1"),
    knob("backend_keepalive", bool, True, "Reuse connections to the backends (mod_proxy's "
         "default); off renders ProxyPass disablereuse=On: a new connection per request."),
    knob("lbmethod", str, "byrequests", "mod_proxy_balancer's method with several backends: "
         "byrequests (shares of requests by weight) or bybusyness (the member with the "
         "fewest requests in progress); inert with one backend.",
         choices=("byrequests", "bybusyness"), source="S1"),
    knob("weights", str, "", "Each backend's loadfactor, comma-separated in backend order "
         "(\"1,2,1\"); empty: all 1. Needs as many as there are backends.",
         validate=weights_problem),
    knob("cache", str, "none", "mod_cache in front of the proxy: none (pure mod_proxy "
         "pass-through), disk (mod_cache_disk under the run directory) or socache "
         "(mod_cache_socache in shared memory, shmcb). S1 measured mod_cache slightly "
         "slower than plain Apache.", choices=("none", "disk", "socache"), source="S1"),
    knob("cache_quick_handler", bool, True, "CacheQuickHandler: serve hits before any other "
         "request phase (on, Apache's default) or as a normal handler after them (off).",
         acts_with=CACHING, inert_why=ONLY_CACHING),
    knob("cache_lock", bool, True, "CacheLock: one request at a time stores a URL, the "
         "others pass meanwhile. On here (Apache's default is off): without it concurrent "
         "misses on mod_cache_disk rewrite the entry's header and body apart, readers find "
         "them mismatched (AH00710), miss and store again: a storm that held 5-25% misses "
         "and 1,300-4,200 req/s for seconds (16 connections, a cold start), where the lock "
         "gave 7 misses in 100,000 and 16,000 req/s.",
         acts_with=CACHING, inert_why=ONLY_CACHING),
    knob("cache_default_expire", int, 3600, "CacheDefaultExpire: seconds a response with "
         "neither an expiry nor a Last-Modified stays fresh (with "
         "cache_ignore_no_lastmod on).", min=0, max=31_536_000, acts_with=CACHING,
         inert_why=ONLY_CACHING, unit="s"),
    knob("cache_ignore_no_lastmod", bool, False, "CacheIgnoreNoLastMod: also cache responses "
         "without a Last-Modified header (dynamic pages).", acts_with=CACHING,
         inert_why=ONLY_CACHING),
    knob("cache_max_object_bytes", int, 0, "Largest response cached: CacheMaxFileSize "
         "(disk) or CacheSocacheMaxSize (socache); 0 = the module's default (1,000,000 B "
         "for disk, 102,400 B for socache).", min=0, max=1 << 31, acts_with=CACHING,
         inert_why=ONLY_CACHING, unit="bytes"),
    knob("cache_socache_bytes", int, 512_000, "Size of the shmcb shared-memory cache "
         "(shmcb's default 512,000 B).", min=65_536, max=1 << 31,
         acts_with={"cache": "socache"}, unit="bytes"),
    nofile_knob(COMPONENT, "Open-files limit of the proxy's processes (a client and a "
                "backend connection per request in progress; 0 = inherit)."),
]
