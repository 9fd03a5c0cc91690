from functools import partial

from ...knobs import Knob

COMPONENT = "squid"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
KNOBS = [
    knob("cache_mem_mb", int, 256, "cache_mem: memory for hot and in-transit objects, in "
         "MB (squid 5's default).", min=0, max=65536, unit="MB"),
    knob("disk_cache_mb", int, 0, "An aufs cache_dir of this many MB in the run directory, "
         "emptied at every start (0 = memory only, squid 5's default).", min=0,
         max=1_048_576, unit="MB"),
    knob("maximum_object_size_kb", int, 4096, "maximum_object_size: the largest response "
         "stored at all, in KB (4 MB by default).", min=1, max=4_194_304, unit="KB"),
    knob("maximum_object_size_in_memory_kb", int, 512, "maximum_object_size_in_memory: "
         "the largest response kept in cache_mem, in KB (512 KB; squid 2.7, which S1 "
         "measured, kept only 8 KB objects in memory).", min=1, max=4_194_304, unit="KB"),
    knob("workers", int, 1, "Worker processes: 1 only. SMP workers need /run/squid for "
         "their IPC sockets and /dev/shm segments named per service, system paths every "
         "squid on the machine shares.", choices=(1,)),
]
