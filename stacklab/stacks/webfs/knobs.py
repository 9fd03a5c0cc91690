from functools import partial

from ...knobs import Knob

COMPONENT = "webfs"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
# webfsd 1.21 stands in for the studies' boa (S1): a single-process, select()-driven
# static server. Keep-alive is always on and nothing is compressed; its TLS (-S, GnuTLS
# priority strings) has no protocol or session settings of ours, so the shared TLS knobs
# are not declared for it.
KNOBS = [
    knob("timeout", int, 60, "Network timeout in seconds (-t): also how long an idle "
         "keep-alive connection stays open.", min=1, max=3600, source="S1", unit="s"),
    knob("max_connections", int, 32, "Connections served at once (-c); more wait in the "
         "listen queue.", min=1, max=65536, source="S1"),
    knob("dir_cache", int, 128, "Directories whose listings are cached (-a).", min=1,
         max=100_000),
    knob("access_log", bool, True, "Write an access log (-L, flushed every line, in the "
         "run directory).", source="S1"),
    knob("expires", int, 0, "Expires header on every file (-e; 0 = none). webfsd dates "
         "it from the file's mtime, not from now: on files older than this it is already "
         "past.", min=0, max=31_536_000, source="S1", unit="s"),
]
