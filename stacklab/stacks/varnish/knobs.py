from functools import partial

from ...knobs import Knob

COMPONENT = "varnish"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
# Defaults are Debian's varnish.service (-s malloc,256m) and varnishd 7.1's parameters.
KNOBS = [
    knob("storage_mb", int, 256, "Cache storage in memory, in MB (-s malloc).", min=8,
         max=65536, unit="MB"),
    knob("ttl", int, 120, "Seconds an object stays fresh when the backend says nothing "
         "(-t default_ttl), and for every object with varnish.honour_cache_control off.",
         min=0, max=31_536_000, unit="s"),
    knob("grace", int, 10, "Seconds an expired object may still be served while a fresh "
         "copy is fetched (default_grace).", min=0, max=31_536_000, unit="s"),
    knob("honour_cache_control", bool, True, "Whether the backend's Cache-Control and "
         "Expires decide what is cached and for how long; off: every cacheable response "
         "is kept varnish.ttl seconds whatever they say, as S1 did to cache dynamic pages.",
         source="S1", caution="off serves pages the application marked no-store, private "
         "or already expired to every client for varnish.ttl seconds"),
    knob("honour_cookies", bool, True, "Varnish's own rule: a request with a Cookie or "
         "Authorization header is passed, a response with Set-Cookie is not cached; off: "
         "Cookie and Set-Cookie are stripped so that pages cache.",
         caution="off drops every cookie, so sessions and logins stop working"),
    knob("thread_pools", int, 2, "Worker thread pools (thread_pools); each has its own "
         "acceptor thread.", min=1, max=32),
    knob("thread_pool_min", int, 100, "Worker threads each pool keeps, started at once "
         "(thread_pool_min).", min=5, max=5000),
    knob("thread_pool_max", int, 5000, "Most worker threads a pool may have "
         "(thread_pool_max).", min=5, max=100_000),
]
