"""Spec validation: every bad input is one SpecError naming file, key path and value."""

import pytest

from stacklab.errors import SpecError
from stacklab.experiment.spec import parse_duration, parse_spec

GOOD = {
    "experiment": {"name": "t", "repetitions": 2, "duration": "2s", "warmup": "500ms"},
    "load": {"keepalive": False},
    "knobs": {"nginx": {"sendfile": True}},
    "matrix": {"stack": ["nginx", "apache"], "workload": ["static-page"],
               "concurrency": [1, 8], "nginx": {"worker_processes": [1, 2]},
               "exclude": [{"stack": "apache", "concurrency": 8}]},
}


def with_(path, value):
    import copy
    doc = copy.deepcopy(GOOD)
    node = doc
    *parents, last = path
    for p in parents:
        node = node.setdefault(p, {})
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return doc


def test_good_spec_parses(spec_args):
    spec = parse_spec(GOOD, "x.toml", *spec_args)
    assert spec.experiment.duration == 2.0 and spec.experiment.warmup == 0.5
    assert spec.axes["nginx.worker_processes"] == (1, 2)
    assert spec.fixed_knobs == {"load.keepalive": False, "nginx.sendfile": True}


@pytest.mark.parametrize("path, value, key, fragment", [
    (("experiment", "nmae"), "x", "experiment.nmae", "Extra inputs"),
    (("experiment", "repetitions"), "3", "experiment.repetitions", "integer"),
    (("experiment", "repetitions"), 0, "experiment.repetitions", "1..100"),
    (("experiment", "duration"), "fast", "experiment.duration", "duration"),
    (("experiment", "requests"), 100, "experiment.duration", "exactly one"),
    (("experiment", "requests_per_connection"), 52, "experiment.duration", "exactly one"),
    (("experiment", "requests_per_connection"), 0, "experiment.requests_per_connection",
     "greater than or equal to 1"),
    (("experiment", "name"), "a b", "experiment.name", "pattern"),
    (("matrix", "stack"), [], "matrix.stack", "at least one"),
    (("matrix", "stack"), ["nginx", "iis"], "matrix.stack", "unknown stack"),
    (("matrix", "workload"), ["video"], "matrix.workload", "unknown workload"),
    (("matrix", "concurrency"), [0], "matrix.concurrency", "integer 1..100000"),
    (("matrix", "concurrency"), KeyError, "matrix.concurrency", "missing axis"),
    (("matrix", "nginx"), {"worker_procs": [1]}, "matrix.nginx.worker_procs", "unknown knob"),
    (("matrix", "nginx"), {"worker_processes": ["two"]}, "matrix.nginx.worker_processes",
     "takes an integer"),
    (("matrix", "tomcat"), {"size": [1]}, "matrix.tomcat.size", "unknown component"),
    (("matrix", "threads"), [1], "matrix.threads", "unknown axis"),
    (("matrix", "exclude"), [{"stack": "iis"}], "matrix.exclude[0].stack", "not a value"),
    (("matrix", "exclude"), [{"c": 1}], "matrix.exclude[0].c", "not an axis"),
    (("load", "keepalive"), "yes", "load.keepalive", "takes true or false"),
    (("load", "rate"), -5, "load.rate", ">= 0"),
    (("knobs", "apache"), {"mpm": "prefork2"}, "knobs.apache.mpm", "one of"),
    (("benchmark",), {}, "benchmark", "unknown section"),
    (("matrix", "workload"), ["video:600"], "matrix.workload", "unknown workload"),
    (("matrix", "workload"), ["static-page:"], "matrix.workload", "such as 600, 26k"),
    (("matrix", "workload"), ["static-page:6 KB"], "matrix.workload", "such as 600, 26k"),
    (("matrix", "workload"), ["static-page:100"], "matrix.workload", "256..64m, not 100"),
    (("matrix", "workload"), ["php-cpu:2k"], "matrix.workload", "whole number"),
    (("matrix", "workload"), ["photos:60"], "matrix.workload", "takes no parameter"),
    (("matrix", "workload"), ["portal-page:26k", "portal-page:26624"], "matrix.workload",
     "values repeat"),
])
def test_bad_spec_names_key_and_value(spec_args, path, value, key, fragment):
    with pytest.raises(SpecError) as e:
        parse_spec(with_(path, value), "x.toml", *spec_args)
    assert e.value.file == "x.toml"
    assert e.value.key == key
    assert fragment in e.value.problem
    assert "\n" not in str(e.value)


def test_axis_and_fixed_value_for_same_knob_is_refused(spec_args):
    doc = with_(("knobs", "nginx"), {"worker_processes": 1})
    with pytest.raises(SpecError) as e:
        parse_spec(doc, "x.toml", *spec_args)
    assert e.value.key == "matrix.nginx.worker_processes"


def test_toml_syntax_error_names_file(tmp_path, spec_args):
    from stacklab.experiment.spec import load_spec
    bad = tmp_path / "bad.toml"
    bad.write_text("[experiment\nname='x'")
    with pytest.raises(SpecError) as e:
        load_spec(bad, *spec_args)
    assert str(bad) in str(e.value)


@pytest.mark.parametrize("text, seconds", [("500ms", 0.5), ("5s", 5), ("2m", 120), (3, 3),
                                           ("1.5s", 1.5), ("1h", 3600)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["5 parsecs", "", "-1s", True, "2000", " 5 "])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_presets_are_valid(spec_args):
    from pathlib import Path
    from stacklab.experiment.spec import load_spec
    presets = sorted((Path(__file__).parent.parent / "presets").glob("*.toml"))
    assert presets
    for p in presets:
        load_spec(p, *spec_args)


def test_a_directory_instead_of_a_file_is_one_error(tmp_path, spec_args):
    from stacklab.experiment.spec import load_spec
    with pytest.raises(SpecError) as e:
        load_spec(tmp_path, *spec_args)
    assert str(tmp_path) in str(e.value) and "directory" in str(e.value).lower()


@pytest.mark.parametrize("path, value, key", [
    (("experiment", "duration"), "nan", "experiment.duration"),
    (("experiment", "duration"), float("inf"), "experiment.duration"),
    (("experiment", "warmup"), float("nan"), "experiment.warmup"),
    (("load", "timeout_s"), float("nan"), "load.timeout_s"),
    (("experiment", "name"), "2024", "experiment.name"),
    (("matrix", "stack"), [["nginx"]], "matrix.stack"),
    (("matrix", "workload"), [{"a": 1}], "matrix.workload"),
    (("matrix", "concurrency"), [[1, 2]], "matrix.concurrency"),
])
def test_odd_values_are_one_error_not_a_traceback(spec_args, path, value, key):
    with pytest.raises(SpecError) as e:
        parse_spec(with_(path, value), "x.toml", *spec_args)
    assert e.value.key == key


def test_a_different_seed_is_a_different_trial(spec_args):
    from stacklab.experiment.plan import make_plan
    from stacklab.stacks import STACKS
    a = make_plan(parse_spec(GOOD, "x.toml", *spec_args), STACKS)
    b = make_plan(parse_spec(with_(("experiment", "seed"), 7), "x.toml", *spec_args), STACKS)
    assert {t.id for t in a.trials}.isdisjoint({t.id for t in b.trials})


def test_workload_parameters_are_spelled_one_way_and_keep_bare_ids(spec_args):
    from stacklab.experiment.plan import make_plan
    from stacklab.stacks import STACKS
    doc = with_(("matrix", "workload"), ["static-page", "static-page:600", "portal-page:26624",
                                         "portal-page:126237"])
    doc["matrix"]["exclude"] = [{"stack": "apache", "workload": "portal-page:26K"}]
    spec = parse_spec(doc, "x.toml", *spec_args)
    assert spec.axes["workload"] == ("static-page", "static-page:600", "portal-page:26k",
                                     "portal-page")
    assert spec.exclude[0]["workload"] == "portal-page:26k"
    plan = make_plan(spec, STACKS)
    bare = make_plan(parse_spec(GOOD, "x.toml", *spec_args), STACKS)
    ids = {t.id for t in plan.trials}
    assert {t.id for t in bare.trials} <= ids        # a bare name hashes as it always did
    labels = {t.label().split()[1] for t in plan.trials}
    assert labels == {"static-page", "static-page:600", "portal-page:26k", "portal-page"}
    assert not any(t.stack == "apache" and t.workload == "portal-page:26k" for t in plan.trials)


def test_requests_in_proportion_to_the_concurrency(spec_args):
    """S5 sent c × 52 requests: requests_per_connection makes each trial's count c × n,
    and a spec without it keeps its trials' ids (the key is not in their definition)."""
    from stacklab.experiment.plan import expand
    from stacklab.stacks import STACKS
    doc = with_(("experiment", "duration"), KeyError)
    doc["experiment"]["requests_per_connection"] = 52
    spec = parse_spec(doc, "x.toml", *spec_args)
    assert {t.concurrency: t.requests(spec.experiment) for t in expand(spec, STACKS)} == \
        {1: 52, 8: 416}
    plain = parse_spec(GOOD, "x.toml", *spec_args)
    assert "requests_per_connection" not in plain.measure
    huge = dict(doc, experiment={**doc["experiment"], "requests_per_connection": 10**9})
    with pytest.raises(SpecError) as e:
        parse_spec(huge, "x.toml", *spec_args)
    assert e.value.key == "experiment.requests_per_connection"
