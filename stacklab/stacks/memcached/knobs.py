from functools import partial

from ...knobs import Knob

COMPONENT = "memcached"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
KNOBS = [
    knob("memory_mb", int, 64, "Item memory in MB (-m).", min=8, max=65536, source="S3",
         unit="MB"),
    knob("threads", int, 4, "Worker threads (-t).", min=1, max=256, source="S3"),
]
