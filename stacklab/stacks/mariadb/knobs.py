from functools import partial

from ...knobs import Knob
from .. import includewrites
from ..userconf import include_knob
from .configtest import check_file

COMPONENT = "mariadb"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
KNOBS = [
    knob("engine", str, "innodb", "Storage engine of the model application's tables "
         "(S1 used InnoDB; skip-innodb meant MyISAM).", choices=("innodb", "myisam"),
         source="S1"),
    knob("innodb_buffer_pool_size_mb", int, 128, "innodb_buffer_pool_size in MB (S1: "
         "8 → 256).", min=8, max=65536, source="S1", unit="MB"),
    knob("key_buffer_size_mb", int, 16, "key_buffer_size in MB: MyISAM index cache (S1: "
         "16 → 256).", min=1, max=65536, source="S1", unit="MB"),
    knob("query_cache_type", str, "off", "Query cache: off, on (every SELECT) or demand "
         "(SQL_CACHE only). S1's test 2 repeats the same rows to exercise it.",
         choices=("off", "on", "demand"), source="S1"),
    knob("query_cache_size_mb", int, 16, "query_cache_size in MB (S1: 16 → 32/64).",
         min=0, max=4096, source="S1", unit="MB"),
    knob("query_cache_limit_kb", int, 1024, "query_cache_limit in KiB: larger results are "
         "not cached (S1: 1 → 2/4 MB).", min=1, max=1_048_576, source="S1", unit="KiB"),
    knob("table_open_cache", int, 2000, "table_open_cache (S1's table_cache; 64 was too "
         "low).", min=10, max=1_000_000, source="S1"),
    knob("sort_buffer_size_kb", int, 2048, "sort_buffer_size in KiB (S1: ~8 MB).",
         min=32, max=1_048_576, source="S1", unit="KiB"),
    knob("read_buffer_size_kb", int, 128, "read_buffer_size in KiB (S1: ~8 MB).",
         min=8, max=2_097_152, source="S1", unit="KiB"),
    knob("join_buffer_size_kb", int, 256, "join_buffer_size in KiB (S1: ~8 MB).",
         min=1, max=1_048_576, source="S1", unit="KiB"),
    knob("max_connections", int, 151, "max_connections.", min=10, max=100_000,
         source="S1"),
    knob("innodb_flush_log_at_trx_commit", int, 1, "1: flush the redo log at every "
         "commit; 2: write at commit, flush each second; 0: both each second.", min=0,
         max=2, source="S1"),
    knob("skip_name_resolve", bool, True, "Never resolve client host names.",
         source="S1"),
    include_knob(COMPONENT, "cnf_extra", "A file of your own server options (relative to "
                 "the experiment file), read after stacklab's my.cnf in the [mariadbd] "
                 "group unless it opens another; a later option wins; \"\" = none.",
                 check_file, includewrites.ini(includewrites.MARIADB_WRITES)),
]
