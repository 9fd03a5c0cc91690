"""combine (S1's last step): the single-knob winners of a stored experiment, their
combination planned as every subset against the defaults, the additivity verdict, and
the combination's configs with why each setting; once end to end on a real nginx."""

import pytest
from rich.console import Console

from stacklab.host import lab
from stacklab.analysis.analyze import load_view
from stacklab.cli import main
from stacklab.methods.combine import Additivity, additivity, combined_doc, why_lines, winners
from stacklab.env import Environment
from stacklab.errors import ExitStatus
from stacklab.experiment.plan import make_plan
from stacklab.experiment.spec import parse_spec
from stacklab.stacks import REGISTRY, STACKS
from stacklab.store import Outcome, RunRecord, Store
from stacklab.workloads import WORKLOADS

from fakes import VERDICTS, fake_report, fake_resources
from helpers import require_engine

SPEC = {"experiment": {"name": "knobs", "description": "", "repetitions": 3,
                       "duration": 1.0, "requests": None, "warmup": 0.3, "seed": 1,
                       "keep_cpus_awake": False, "remeasure": 0},   # runs counted
        "axes": {}, "exclude": [], "fixed_knobs": {"load.keepalive": True}}


def knob_experiment(db, name: str, speeds: dict[tuple, float], reps: int = 3) -> int:
    """nginx static-page c=4 with access_log and open_file_cache varied: `speeds` maps
    (access_log, open_file_cache) to req/s; repetitions vary ±1%."""
    store = Store.open(db)
    trials = []
    for (log, cache) in speeds:
        knobs = {"load.keepalive": True, "nginx.access_log": log, "nginx.open_file_cache": cache}
        d = {"stack": "nginx", "workload": "static-page", "concurrency": 4, "knobs": knobs,
             "measure": {"duration_s": 1.0}}
        trials.append((f"t{int(log)}{cache:010d}", f"nginx log={log} cache={cache}", d))
    exp = store.new_experiment(name, f"{name}.toml", "h", {**SPEC, "experiment": {
        **SPEC["experiment"], "name": name}}, trials,
        {"cores": 2, "cpu_model": "Test CPU", "kernel": "6.1", "memory_mib": 1024},
        "0.1.0", "abc123", "2026-01-01T00:00:00+00:00")
    for rep in range(1, reps + 1):
        for (tid, _, d), key in zip(trials, speeds):
            rps = speeds[key] * (1 + (rep - 2) * 0.01)
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=tid, repetition=rep, outcome=Outcome.OK,
                started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:00:03",
                knobs={"nginx": {k.split(".")[1]: v for k, v in d["knobs"].items()
                                 if k.startswith("nginx.")}},
                versions={"nginx": "1.22.1", "stacklab-load": "0.1.0"},
                configs={"nginx/nginx.conf": "listen 127.0.0.1:8080;"}, verdicts=VERDICTS,
                load=fake_report(rps, 4e6 / rps, seed=rep),
                resources=fake_resources("nginx", 2.0 * rps * 2e-5, 12.0),
                flags=[], run_dir="/tmp/x"))
    store.close()
    return exp


def view(db, name):
    store = Store.open(db)
    try:
        return load_view(store, name)
    finally:
        store.close()


# defaults, each change alone, and (for the combination) both
SINGLES = {(True, 0): 10000.0, (False, 0): 12000.0, (True, 1000): 11000.0}


def test_winners_are_the_significant_single_changes(tmp_path):
    knob_experiment(tmp_path / "r.db", "knobs", {**SINGLES, (True, 10): 9000.0})
    [g] = winners(view(tmp_path / "r.db", "knobs"), REGISTRY)
    assert (g.stack, g.workload, g.concurrency) == ("nginx", "static-page", 4)
    assert [(w.knob, w.value) for w in g.winners] == [("nginx.access_log", False),
                                                      ("nginx.open_file_cache", 1000)]
    assert g.winners[0].comparison.ratio == pytest.approx(1.2, rel=0.01)
    assert g.default.knobs["nginx.access_log"] is True


def test_a_busy_host_takes_no_winner_away(tmp_path):
    """1.2× and 1.1× over the defaults, the defaults beside other work: the worst case of
    what it could have done (1.5×) used to leave no winner; the interval decides now."""
    from dataclasses import replace
    knob_experiment(tmp_path / "r.db", "knobs", SINGLES)
    v = view(tmp_path / "r.db", "knobs")
    busy = replace(v, summaries=[replace(s, disturbance=1.5) if not s.knobs.get(
        "nginx.open_file_cache") and s.knobs.get("nginx.access_log", True) else s
        for s in v.summaries])
    def found(view):
        return [[(w.knob, w.value) for w in g.winners] for g in winners(view, REGISTRY)]
    assert found(v) and found(busy) == found(v)


def test_no_winner_when_nothing_beats_the_defaults(tmp_path):
    knob_experiment(tmp_path / "r.db", "knobs", {(True, 0): 10000.0, (False, 0): 9000.0,
                                                 (True, 1000): 10000.0})
    assert winners(view(tmp_path / "r.db", "knobs"), REGISTRY) == []


def test_the_combination_is_a_valid_experiment_of_every_subset(tmp_path):
    knob_experiment(tmp_path / "r.db", "knobs", SINGLES)
    [g] = winners(view(tmp_path / "r.db", "knobs"), REGISTRY)
    doc = combined_doc(SPEC, g, "knobs-combined", "why", 4)
    spec = parse_spec(doc, "combined", REGISTRY, STACKS, set(WORKLOADS))
    plan = make_plan(spec, STACKS)
    values = {(dict(t.knobs)["nginx.access_log"], dict(t.knobs)["nginx.open_file_cache"])
              for t in plan.trials}
    assert values == {(True, 0), (False, 0), (True, 1000), (False, 1000)}
    assert len(plan.runs) == 4 * 4
    assert all(dict(t.knobs)["load.keepalive"] is True for t in plan.trials)


@pytest.mark.parametrize("both, verdict", [
    (13200.0, "adds up"),               # 1.2 × 1.1 = 1.32
    (12100.0, "less than the product"),
    (15000.0, "more than the product"),
])
def test_additivity_verdict(tmp_path, both, verdict):
    knob_experiment(tmp_path / "r.db", "knobs", SINGLES)
    [g] = winners(view(tmp_path / "r.db", "knobs"), REGISTRY)
    knob_experiment(tmp_path / "r.db", "knobs-combined", {**SINGLES, (False, 1000): both})
    a = additivity(view(tmp_path / "r.db", "knobs-combined"), g, REGISTRY)
    assert isinstance(a, Additivity)
    assert a.expected == pytest.approx(1.32, rel=0.01)
    assert a.combined.ratio == pytest.approx(both / 10000, rel=0.01)
    assert a.verdict.startswith(verdict)


def test_why_traces_each_setting_to_its_measurement(tmp_path):
    knob_experiment(tmp_path / "r.db", "knobs", {**SINGLES, (False, 1000): 13200.0})
    v = view(tmp_path / "r.db", "knobs")
    both = next(s for s in v.summaries if s.knobs["nginx.access_log"] is False
                and s.knobs["nginx.open_file_cache"] == 1000)
    lines = why_lines(both, v, REGISTRY, lambda c: f"{c.ratio:.2f}x")
    assert len(lines) == 3
    assert "nginx.access_log = False (default True)" in lines[0]
    assert "alone: 1.20x req/s against the defaults, better" in lines[0]
    assert "nginx.open_file_cache = 1000 (default 0)" in lines[1]
    assert lines[2].startswith("all 2 together: 1.32x req/s against the defaults, better")


def export(db, trial, out, *more):
    env = Environment(stdout=Console(record=True, width=400),
                      stderr=Console(record=True, width=400), clock=lambda: "t", db=db,
                      lab_root=out.parent / "lab")
    status = main(["export-config", trial, "-e", "knobs", "-o", str(out), *more], env)
    return status, env.stdout.export_text() + env.stderr.export_text()


def test_export_config_writes_only_what_a_verdict_supports(tmp_path):
    """The issue's case: a trial whose changed settings no verdict supports (each the
    same alone, and together no better) is not exported as if one did; of one no
    better than the defaults as a whole, only the setting that was better alone is
    exported, as the trial that changes just it."""
    db = tmp_path / "r.db"
    knob_experiment(db, "knobs", {(True, 0): 10000.0, (False, 0): 12000.0,
                                  (True, 1000): 10000.0, (False, 1000): 10000.0})
    # open_file_cache = 1000 undid access_log's gain: the same as the defaults together
    status, said = export(db, "t00000001000", tmp_path / "a")
    assert status == ExitStatus.OK
    assert "exported trial t00000000000" in said and "left at their defaults: " \
        "nginx.open_file_cache" in said
    readme = (tmp_path / "a" / "README.txt").read_text()
    assert "left at its default: nginx.open_file_cache = 1000" in readme
    assert '"open_file_cache": 0' in readme       # the knob values written are the winner's
    # nothing supported: refused, naming each setting and its verdict
    db2 = tmp_path / "r2.db"
    knob_experiment(db2, "knobs", {(True, 0): 10000.0, (False, 0): 10000.0,
                                   (True, 1000): 10000.0, (False, 1000): 10000.0})
    status, said = export(db2, "t00000001000", tmp_path / "b")
    flat = " ".join(said.split())
    assert status != ExitStatus.OK and not (tmp_path / "b").exists()
    assert "2 of its 2 changed settings have no verdict that supports them" in flat
    assert "nginx.access_log = False alone: same" in flat and "nothing exported" in flat
    # asked for anyway: written, each such setting marked
    status, _ = export(db2, "t00000001000", tmp_path / "c", "--unsupported")
    readme = (tmp_path / "c" / "README.txt").read_text()
    assert status == ExitStatus.OK and readme.count("NOT SUPPORTED (--unsupported)") == 2


def test_export_config_writes_why(tmp_path):
    db = tmp_path / "r.db"
    knob_experiment(db, "knobs", {**SINGLES, (False, 1000): 13200.0})
    out = tmp_path / "cfg"
    env = Environment(stdout=Console(record=True, width=200), stderr=Console(record=True),
                      clock=lambda: "t", db=db, lab_root=tmp_path / "lab")
    assert main(["export-config", "t00000001000", "-e", "knobs", "-o",
                 str(out)], env) == ExitStatus.OK
    readme = (out / "README.txt").read_text()
    assert "What changed from the defaults, and why" in readme
    assert "nginx.access_log = False (default True)" in readme


def test_combine_with_nothing_to_combine_says_so(tmp_path):
    db = tmp_path / "r.db"
    knob_experiment(db, "knobs", {(True, 0): 10000.0, (False, 0): 10000.0,
                                  (True, 1000): 10000.0})
    env = Environment(stdout=Console(record=True, width=200), stderr=Console(record=True),
                      clock=lambda: "t", db=db, lab_root=tmp_path / "lab")
    assert main(["combine", "knobs"], env) == ExitStatus.OK
    assert "nothing to combine" in env.stdout.export_text()


@pytest.mark.integration
def test_combine_measures_the_combination_on_real_nginx(tmp_path):
    """The winners come from stored figures; the combination is measured for real."""
    require_engine()
    db = tmp_path / "r.db"
    knob_experiment(db, "knobs", SINGLES)
    env = Environment(stdout=Console(record=True, width=200), stderr=Console(record=True),
                      clock=lambda: "2026-01-01T00:00:00+00:00", db=db,
                      lab_root=lab.default_root())   # servers' users can reach it
    assert main(["combine", "knobs", "-r", "2"], env) == ExitStatus.OK
    text = env.stdout.export_text()
    assert "do the gains add up?" in text and "verdict: " in text
    combined = view(db, "knobs-combined")
    assert len(combined.summaries) == 4
    assert all(s.runs_ok == 2 for s in combined.summaries)
    trial = next(s for s in combined.summaries if s.knobs["nginx.access_log"] is False
                 and s.knobs["nginx.open_file_cache"] == 1000)
    # 2 rounds of a small effect may support neither setting: the export is then
    # refused unless asked for anyway (test_export_config_writes_only_what_…)
    assert f"export-config {trial.trial_id} -e knobs-combined" in text
    out = tmp_path / "cfg"
    assert main(["export-config", trial.trial_id, "-e", "knobs-combined", "-o", str(out),
                 "--unsupported"], env) == ExitStatus.OK
    readme = (out / "README.txt").read_text()
    assert "nginx.access_log = False (default True)" in readme
    assert "access_log off" in (out / "nginx/nginx.conf").read_text()


def test_tunes_final_line_names_the_settings_no_verdict_supports():
    """tune's last lines say, before export-config is run, which of the best's settings
    it would leave out: none when the best beat the defaults as a whole; else each not
    better alone (or not measured alone)."""
    from stacklab.analysis.analyze import Decision
    from stacklab.report.tunelines import unsupported

    class Row:                       # what unsupported reads of a comparison
        def __init__(self, kind):
            self.decision, self.metric = Decision(kind), "req/s"
    keys = ["nginx.sendfile", "nginx.worker_processes"]
    alone = {"nginx.sendfile": {"req/s": Row("better")},
             "nginx.worker_processes": {"req/s": Row("same")}}
    assert unsupported(keys, {"req/s": Row("better")}, alone, "rps") == []
    assert unsupported(keys, {"req/s": Row("no-verdict")}, alone, "rps") == [
        "nginx.worker_processes"]
    assert unsupported(keys, {"req/s": Row("no-verdict")}, {}, "rps") == keys
