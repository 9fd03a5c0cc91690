"""A run's resources are typed (issue 22): each component's monitor summary and each
layer's own part, read by name. The stored and exported object is the flat one it always
was (the lab's parts under "_" keys); Resources.from_json / to_json alone convert, so no
reader filters keys by their first character."""

import re
from pathlib import Path

from stacklab.store.records import Resources, RunRecord

from fakes import fake_resources

PACKAGE = Path(__file__).resolve().parent.parent / "stacklab"
# The modules that read a run's resources (layers produce their parts as they always
# did, and the runner converts them once: Resources.from_json(composed.record())).
# (analysis/ whole: its stats.py reads no resources, so naming the directory is no looser.)
READERS = ("analysis", "methods/combine.py", "report", "studies", "commands")
LAB_KEY = re.compile(r"""['"]_(host|machine|fs|layers|accounting|pageview|net|system|"""
                     r"""counters|logs|monitor)['"]""")
# a reader telling a lab part from a component by a key's first character, in any spelling
FIRST_CHARACTER = re.compile(r"""startswith\(\s*['"]_['"]|\[0\]\s*==\s*['"]_['"]""")


def stored() -> dict:
    return {**fake_resources("nginx", 0.5, 12.0),
            "_host": {"busy_share": 0.1}, "_machine": {"cpus": 1},
            "_fs": {"mounted": True}, "_layers": {"varnish": {"hit_ratio": 0.9}},
            "_pageview": {"first": {"requests": 3}}, "_dummy": {"tag": "a new layer's"}}


def test_the_flat_object_splits_into_components_and_the_lab_parts():
    res = Resources.from_json(stored())
    assert list(res.components) == ["nginx"]
    assert res.components["nginx"]["cpu_s"] == 0.5 == res.figure("nginx", "cpu_s")
    assert res.figure("nginx", "nope") is None and res.figure("apache", "cpu_s") is None
    assert res.host == {"busy_share": 0.1} and res.machine == {"cpus": 1}
    assert res.fs == {"mounted": True} and res.layers["varnish"]["hit_ratio"] == 0.9
    assert res.part("monitor")["sampler_cpu_s"] == 0.001
    assert res.lab["dummy"] == {"tag": "a new layer's"}
    assert res.net == res.part("system") == res.part("counters") == res.logs == \
        res.part("accounting") == {}


def test_it_round_trips_both_ways():
    doc = stored()
    assert Resources.from_json(doc).to_json() == doc
    res = Resources(components={"haproxy": {"cpu_s": 1.0}}, lab={"net": {"mode": "veth"}})
    assert Resources.from_json(res.to_json()) == res
    assert Resources.from_json({}) == Resources() and Resources().to_json() == {}


def test_a_record_given_the_flat_object_holds_it_typed():
    """Tests and the journal's old entries build records from the stored object."""
    r = RunRecord(experiment_id=1, trial_id="t", repetition=1, outcome="ok",
                  started_at="a", ended_at="b", knobs={}, versions={}, configs={},
                  resources=stored())
    assert r.resources == Resources.from_json(stored())
    assert RunRecord.from_row(r.to_row()) == r


def test_no_reader_filters_resources_by_their_first_character():
    files = [p for p in PACKAGE.rglob("*.py")]
    assert [p.name for p in files if FIRST_CHARACTER.search(p.read_text())] == []
    readers = [p for p in files if any(str(p.relative_to(PACKAGE)) == r or
                                       str(p.relative_to(PACKAGE)).startswith(r + "/")
                                       for r in READERS)]
    assert readers
    assert [str(p.relative_to(PACKAGE)) for p in readers
            if LAB_KEY.search(p.read_text())] == []
