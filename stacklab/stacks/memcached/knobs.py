from ...knobs import Knob

C = "memcached"
KNOBS = [
    Knob(C, "memory_mb", int, 64, "Item memory in MB (-m).", min=8, max=65536, source="S3"),
    Knob(C, "threads", int, 4, "Worker threads (-t).", min=1, max=256, source="S3"),
]
