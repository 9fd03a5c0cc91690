from functools import partial

from ...knobs import Knob

COMPONENT = "mini-httpd"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
# mini_httpd 1.30 stands in for the studies' thttpd (S1): the same author's small server.
# It forks one process per connection and always closes it (no keep-alive), has no
# compression and no tuning beyond these; its TLS (-S) offers no protocol or session
# settings, so the shared TLS knobs are not declared for it.
KNOBS = [
    knob("access_log", bool, True, "Write an access log (-l, in the run directory).",
         source="S1"),
    knob("max_age", int, 0, "Cache-Control max-age and Expires on every response, in "
         "seconds (-M; 0 = none).", min=0, max=31_536_000, source="S1", unit="s"),
]
