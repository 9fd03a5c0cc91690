"""A knob whose number is in a unit (seconds, ms, MB, KiB, bytes, req/s) declares it, and
every error about its value names it (issue 39): "nginx.keepalive_timeout takes an
integer in seconds (a number alone, not '65s')", "must be <= 3600 s"."""

import pytest

from stacklab.errors import SpecError
from stacklab.experiment.spec import parse_spec
from stacklab.stacks import REGISTRY

from test_spec import with_

# What a name's ending says of its unit; a unit a name does not say (keepalive_timeout,
# ttl) is pinned by the table of errors below.
SUFFIXES = {"_s": ("s",), "_ms": ("ms",), "_mb": ("MB", "MiB"), "_kb": ("KB", "KiB"),
            "_bytes": ("bytes",)}


def test_every_knob_named_for_its_unit_declares_it():
    for knob in REGISTRY.knobs.values():
        for suffix, units in SUFFIXES.items():
            if knob.name.endswith(suffix):
                assert knob.unit in units, knob.key


@pytest.mark.parametrize("path, value, key, said", [
    (("knobs", "nginx"), {"keepalive_timeout": "65s"}, "knobs.nginx.keepalive_timeout",
     "nginx.keepalive_timeout takes an integer in seconds (a number alone, not '65s')"),
    (("knobs", "nginx"), {"keepalive_timeout": 7200}, "knobs.nginx.keepalive_timeout",
     "nginx.keepalive_timeout must be <= 3600 s"),
    (("matrix", "varnish"), {"storage_mb": ["1G"]}, "matrix.varnish.storage_mb",
     "varnish.storage_mb takes an integer in MB (a number alone, not '1G')"),
    (("knobs", "machine"), {"memory_mb": "512M"}, "knobs.machine.memory_mb",
     "machine.memory_mb takes an integer in MiB (a number alone, not '512M')"),
    (("knobs", "net"), {"mode": "veth", "rtt_ms": 5000}, "knobs.net.rtt_ms",
     "net.rtt_ms must be <= 1000 ms"),
    (("load", "rate"), -5, "load.rate", "load.rate must be >= 0 req/s"),
    (("load", "timeout_s"), "30 seconds", "load.timeout_s",
     "load.timeout_s takes a number in seconds (a number alone, not '30 seconds')"),
])
def test_an_error_about_a_knob_with_a_unit_names_the_unit(spec_args, path, value, key, said):
    with pytest.raises(SpecError) as e:
        parse_spec(with_(path, value), "x.toml", *spec_args)
    assert e.value.key == key and e.value.problem == said, str(e.value)


def test_a_knob_without_a_unit_says_only_its_type(spec_args):
    with pytest.raises(SpecError) as e:
        parse_spec(with_(("knobs", "nginx"), {"worker_connections": "many"}), "x.toml",
                   *spec_args)
    assert e.value.problem == "nginx.worker_connections takes an integer"
