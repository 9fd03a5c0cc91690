"""recommend never recommends the lab's conditions (net.*, fs.*, machine.*, load.*) as
server settings: their effects are reported apart, in the one verdict vocabulary, in the
text tables and in `recommend --json` (checked against its schema); combine does not make
a configuration of them and export-config says they are conditions."""

import io
import json
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from stacklab.analysis.analyze import load_view
from stacklab.cli import main
from stacklab.methods.combine import why_lines, winners
from stacklab.env import Environment
from stacklab.errors import ExitStatus
from stacklab.analysis.recommend import SCHEMA_VERSION, best_combinations, conditions, effects
from stacklab.report.text import recommendations_doc, recommendations_tables
from stacklab.stacks import REGISTRY
from stacklab.store import Outcome, RunRecord, Store

from fakes import VERDICTS, fake_report, fake_resources

SCHEMA = Path(__file__).parent.parent / "stacklab" / "report" / "schemas" / \
    "recommend.schema.json"
# (nginx.sendfile, net.link) -> req/s: sendfile off 1.2× the default on either link; the
# 100 Mbit link holds either to a tenth
SPEEDS = {(True, "unlimited"): 20000.0, (False, "unlimited"): 24000.0,
          (True, "100mbit"): 2000.0, (False, "100mbit"): 2400.0}
LINK_RATE = {"unlimited": 2.4e9, "100mbit": 11.9e6}     # bytes/s, as netlab measured


def link_experiment(db: Path, speeds=SPEEDS, reps: int = 4, condition: str = "net.link",
                    name: str = "link") -> None:
    """nginx static-page c=8: nginx.sendfile × a condition (net.link over a veth link,
    where the rate is measured), ±1% runs; `speeds` maps (sendfile, value) to req/s."""
    store = Store.open(db)
    trials = []
    for (sendfile, value) in speeds:
        knobs = {condition: value, "nginx.sendfile": sendfile}
        if condition.startswith("net."):
            knobs["net.mode"] = "veth"
        d = {"stack": "nginx", "workload": "static-page", "concurrency": 8, "knobs": knobs,
             "measure": {"duration_s": 1.0}}
        trials.append((f"s{int(sendfile)}{value[:3]}00000", f"nginx sf={sendfile} {value}", d))
    exp = store.new_experiment(name, f"{name}.toml", "h", {"experiment": {
        "description": ""}}, trials, {"cores": 2, "cpu_model": "Test CPU", "kernel": "6.1"},
        "0.1.0", "abc123", "2026-01-01T00:00:00+00:00")
    for rep in range(1, reps + 1):
        for (tid, _, d), (sendfile, value) in zip(trials, speeds):
            rps = speeds[(sendfile, value)] * (1 + (rep - 2) / 100)
            resources = fake_resources("nginx", rps * 2e-5, 12.0)
            if condition == "net.link":
                resources["_net"] = {"mode": "veth", "link": value,
                                     "rate_bytes_s": LINK_RATE[value], "rtt_ms": 0}
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=tid, repetition=rep, outcome=Outcome.OK,
                started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:00:03",
                knobs={"nginx": {"sendfile": sendfile}},
                versions={"nginx": "1.22.1", "stacklab-load": "0.1.0"},
                configs={"nginx/nginx.conf": "listen 127.0.0.1:8080;"}, verdicts=VERDICTS,
                load=fake_report(rps, 8e6 / rps, seed=rep), resources=resources, flags=[],
                run_dir="/tmp/x"))
    store.close()


@pytest.fixture
def view(tmp_path):
    link_experiment(tmp_path / "r.db")
    store = Store.open(tmp_path / "r.db")
    yield load_view(store, "link")
    store.close()


def test_a_condition_is_no_effect_to_recommend_but_is_reported_as_one(view):
    found = effects(view, REGISTRY)
    assert {e.knob for e in found} == {"nginx.sendfile"}
    assert len(found) == 2                       # sendfile off, on each link
    assert all(e.decision.kind == "better" for e in found)
    links = conditions(view)
    assert {(e.knob, e.value, e.default) for e in links} == {
        ("net.link", "100mbit", "unlimited")}
    assert len(links) == 2                       # the slow link, with sendfile on and off
    for e in links:
        assert e.decision.kind == "worse" and e.gain == pytest.approx(-0.9, abs=0.01)


def test_the_best_is_said_per_condition_and_never_names_one(view):
    found = effects(view, REGISTRY)
    bests = best_combinations(view, REGISTRY, found)
    assert sorted(dict(b.under)["net.link"] for b in bests) == ["100mbit", "unlimited"]
    for b in bests:
        # the fastest under its own link, against the defaults under that link
        assert b.trial.knobs["nginx.sendfile"] is False
        assert b.default.knobs["net.link"] == b.trial.knobs["net.link"]
        assert b.decision.kind == "better"
        assert b.best_single.knob == "nginx.sendfile"


def test_recommend_json_has_conditions_apart_in_the_one_vocabulary(view):
    found = effects(view, REGISTRY)
    doc = recommendations_doc(view, found, best_combinations(view, REGISTRY, found))
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validate(doc, schema)
    assert doc["schema_version"] == SCHEMA_VERSION == schema["properties"][
        "schema_version"]["const"]
    assert {e["knob"] for e in doc["effects"]} == {"nginx.sendfile"}
    assert [e["verdict"] for e in doc["effects"]] == ["better", "better"]
    assert all(e["reason"] is None and e["text"] == "+20.0%" for e in doc["effects"])
    assert [(c["knob"], c["value"], c["verdict"]) for c in doc["conditions"]] == [
        ("net.link", "100mbit", "worse")] * 2
    assert doc["conditions"][0]["measured"] == ["link measured 95.2 Mbit/s"]
    assert all("significant" not in e["rps"] for e in doc["effects"] + doc["conditions"])
    assert sorted(b["conditions"]["net.link"] for b in doc["best"]) == ["100mbit",
                                                                       "unlimited"]


def test_the_schema_refuses_a_condition_among_the_effects(view):
    found = effects(view, REGISTRY)
    doc = recommendations_doc(view, found, best_combinations(view, REGISTRY, found))
    doc["effects"].append({**doc["conditions"][0], "rank": 3, "caution": None})
    del doc["effects"][-1]["measured"]
    with pytest.raises(jsonschema.ValidationError, match="net.link"):
        jsonschema.validate(doc, json.loads(SCHEMA.read_text()))


def test_the_text_shows_the_conditions_in_a_table_of_their_own(view):
    found = effects(view, REGISTRY)
    console = Console(width=250, record=True, color_system=None)
    tables = recommendations_tables(view, found, best_combinations(view, REGISTRY, found))
    assert len(tables) == 3
    for t in tables:
        console.print(t)
    out = console.export_text()
    settings, rest = out.split("the lab's conditions", 1)
    conds, best = rest.split("best combination", 1)
    assert "net.link" not in settings and "nginx.sendfile = False" in settings
    assert "net.link = 100mbit" in conds and "worse" in conds and "95.2 Mbit/s" in conds
    assert "under net.link=100mbit" in best and "under net.link=unlimited" in best


def test_combine_turns_no_condition_into_a_configuration(view, tmp_path):
    [group] = winners(view, REGISTRY)
    assert [w.knob for w in group.winners] == ["nginx.sendfile"]
    assert group.default.knobs["net.link"] == "unlimited"
    # a condition that beats its default (the docroot on a ramdisk) wins nothing either
    link_experiment(tmp_path / "fs.db", {(True, "none"): 20000.0, (False, "none"): 20000.0,
                                         (True, "tmpfs"): 26000.0, (False, "tmpfs"): 26000.0},
                    condition="fs.type", name="fs")
    store = Store.open(tmp_path / "fs.db")
    fs = load_view(store, "fs")
    store.close()
    assert [e.decision.kind for e in conditions(fs)] == ["better", "better"]
    assert winners(fs, REGISTRY) == []


def test_export_config_says_a_condition_is_one(view):
    slow = next(s for s in view.summaries if s.knobs["net.link"] == "100mbit"
                and s.knobs["nginx.sendfile"] is False)
    lines = why_lines(slow, view, REGISTRY, lambda c: f"{c.ratio:.2f}x")
    [link] = [line for line in lines if line.startswith("net.link")]
    assert "a condition of the lab" in link and "not a setting" in link
    [sendfile] = [line for line in lines if line.startswith("nginx.sendfile")]
    # against the defaults under its own link, not the other link's trials
    assert "alone: 1.20x" in sendfile
    assert "trial s0100" in sendfile and "vs s1100" in sendfile


def test_recommend_json_through_the_cli(tmp_path):
    link_experiment(tmp_path / "r.db")
    out = Console(file=io.StringIO(), width=240, color_system=None)
    env = Environment(stdout=out, stderr=Console(file=io.StringIO()), clock=lambda: "t",
                      db=tmp_path / "r.db", lab_root=tmp_path / "lab")
    assert main(["recommend", "link", "--json"], env) == ExitStatus.OK
    doc = json.loads(out.file.getvalue())
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert doc["conditions"] and all(c["knob"] == "net.link" for c in doc["conditions"])


def test_a_setting_behind_a_cache_that_answered_everything_is_not_called_fastest(tmp_path):
    """OPcache off behind Varnish at 100% hits measured as fast as on: the cache ran
    instead of PHP, so recommend says so rather than "fastest measured"."""
    from dataclasses import replace as swap

    from stacklab.analysis.analyze import Estimate, load_view
    from stacklab.analysis.recommend import Best, behind_cache
    from stacklab.store import Store
    from fakes import fake_experiment
    fake_experiment(tmp_path / "c.db", name="cached", flag_apache_256=False)
    store = Store.open(tmp_path / "c.db")
    default = load_view(store, "cached").summaries[0]
    store.close()
    hits = {"varnish": {"hit_ratio": Estimate.of([1.0, 1.0, 1.0]), "spread": {}}}
    cached = swap(default, trial_id="opcache-off", label="opcache off", layers=hits)
    assert behind_cache(cached).startswith("varnish in front answered 100% of the requests")
    assert behind_cache(default) is None
    said = Best("nginx", "static-page", 1, cached, None, None, None,
                default=default).label(lambda s: s.label)
    assert "fastest measured" not in said and "ran for almost none" in said, said
