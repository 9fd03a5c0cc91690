"""`stacklab tune` (issue 26, first part) end to end on loopback: a short real search of
nginx's settings, each trial a stored experiment, resumed where it stopped, the best
measured again against the defaults; and the spec's [tune] refused where it cannot be
searched, naming the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.commands.tune import run_peak_mib
from stacklab.cli import cli
from stacklab.store import Store

from helpers import require_engine

SPEC = """
[experiment]
name = "tn"
repetitions = 2
duration = "1s"
warmup = "0.3s"
remeasure = 0

[load]
keepalive = true

[tune]
trials = {trials}
final_repetitions = 2
candidates = 1
{extra}

[tune.knobs]
"nginx.worker_processes" = [1, 2]
"nginx.sendfile" = true
"nginx.tcp_nopush" = true

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [8]
"""


# The hand preset: differs from the defaults, so the final comparison has it whatever
# the search found (the defaults cannot be the best's settings and the hand's at once)
HAND = """
[tune.hand]
"nginx.sendfile" = false
"nginx.worker_processes" = 2
"""


def invoke(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def write(tmp_path: Path, trials: int = 2, extra: str = "") -> Path:
    spec = tmp_path / "tn.toml"
    spec.write_text(SPEC.format(trials=trials, extra=extra))
    return spec


def experiments(db: Path) -> list[str]:
    store = Store.open(db)
    try:
        return [e.name for e in store.experiments()]
    finally:
        store.close()


@pytest.mark.integration
def test_a_short_search_runs_resumes_and_measures_the_best_again(tmp_path):
    require_engine()
    db = tmp_path / "r.db"
    spec = write(tmp_path, trials=2)
    spec.write_text(spec.read_text() + HAND)
    status, out = invoke("tune", spec, "--db", db)
    assert status == 0, out
    assert "trial 0:" in out and "trial 1:" in out and "best: trial" in out
    assert ("against the defaults, measured again: req/s" in out
            or re.search(r"^best: trial \d+: the defaults$", out, re.M)), out
    assert "its configuration: " in out and "stacklab export-config " in out, out
    # the hand preset measured in the same final experiment, or said to be the best's
    assert ("against the hand preset (nginx.sendfile=False nginx.worker_processes=2), "
            "measured again: req/s" in out or "comes to the best's" in out), out
    names = experiments(db)
    assert {"tn.tune-0", "tn.tune-1"} <= set(names)
    assert "tn.tune-final" in names or "the defaults themselves" in out
    # again without --resume: refused, nothing measured
    status, out = invoke("tune", write(tmp_path, trials=3), "--db", db)
    assert status != 0 and "--resume continues it" in out
    # --resume with one more trial: only that one is measured
    status, out = invoke("tune", write(tmp_path, trials=3), "--db", db, "--resume")
    assert status == 0, out
    # (the best may still be trial 0: "best: trial 0: …" is no trial measured again)
    measured = re.findall(r"^\s*trial (\d+):", out, re.M)
    assert "2" in measured and "0" not in measured, out
    assert experiments(db).count("tn.tune-0") == 1


@pytest.mark.parametrize("extra, knobs, says", [
    ("", '"nginx.nosuch" = true', "tune.knobs.nginx.nosuch"),
    ('objective = "cpu"', "", "load.rate"),
    ('memory = "lots"', "", "tune.memory"),
    ('memory = "512M"', "", "experiment.duration"),     # 1 s: PSS is read every 2 s
    ('objective = "speed"', "", "tune.objective"),
    ('objective = "capacity"', "", "add a [capacity] section"),
    ("", '"nginx.sendfile" = true\n[tune.hand]\n"nginx.nosuch" = 1', "tune.hand.nginx.nosuch"),
    ("", '"nginx.sendfile" = true\n[tune.hand]\n"nginx.sendfile" = 3',
     "tune.hand.nginx.sendfile"),
])
def test_what_cannot_be_searched_is_named(tmp_path, extra, knobs, says):
    spec = write(tmp_path, extra=extra)
    if knobs:
        spec.write_text(spec.read_text().replace('"nginx.sendfile" = true', knobs))
    status, out = invoke("tune", spec, "--dry-run")
    assert status != 0 and says in out, out


def test_a_searched_knob_is_not_also_fixed_and_the_point_is_one(tmp_path):
    spec = write(tmp_path)
    spec.write_text(spec.read_text() + '\n[knobs.nginx]\nsendfile = false\n')
    status, out = invoke("tune", spec, "--dry-run")
    assert status != 0 and "tune.knobs.nginx.sendfile" in out, out
    spec = write(tmp_path)
    spec.write_text(spec.read_text().replace("concurrency = [8]", "concurrency = [8, 16]"))
    status, out = invoke("tune", spec, "--dry-run")
    assert status != 0 and "matrix.concurrency" in out and "one point" in out, out


def test_the_dry_run_prints_the_space_with_its_conditions(tmp_path):
    status, out = invoke("tune", write(tmp_path), "--dry-run")
    assert status == 0, out
    assert "nginx.tcp_nopush: False, True (default True) — only with nginx.sendfile = True" \
        in out


def test_the_best_is_never_a_trial_over_the_memory_budget():
    import optuna

    from stacklab.commands.tune import best_trial
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    for value, over in ((100.0, 10.0), (50.0, -5.0), (70.0, 0.5)):
        trial = study.ask()
        trial.set_user_attr("over_budget_mib", over)
        study.tell(trial, value)
    assert best_trial(study).value == 50.0
    none = optuna.create_study(direction="maximize")
    trial = none.ask()
    trial.set_user_attr("over_budget_mib", 1.0)
    none.tell(trial, 1.0)
    assert best_trial(none) is None


@pytest.mark.integration
def test_a_combination_the_plan_refuses_is_a_failed_trial_and_the_search_goes_on(
        tmp_path, monkeypatch):
    """A trial whose values the plan refuses (here: every one with two workers, refused
    by a stand-in rule) is told failed with the reason and measured never; the search
    still reaches its count of trials and ends with a best."""
    require_engine()
    from stacklab.commands import tune as tuning
    from stacklab.errors import SpecError
    real = tuning.planned

    def refusing(spec):
        if dict(spec.fixed_knobs).get("nginx.worker_processes") == 2:
            raise SpecError(spec.path, "knobs.nginx.worker_processes", 2, "refused here")
        return real(spec)
    monkeypatch.setattr(tuning, "planned", refusing)
    db = tmp_path / "r.db"
    spec = write(tmp_path, trials=3)
    spec.write_text(spec.read_text().replace('"nginx.worker_processes" = [1, 2]',
                                             '"nginx.worker_processes" = [1, 2, 3]'))
    status, out = invoke("tune", spec, "--db", db)
    assert status == 0, out
    refused = [line for line in out.splitlines() if "refused, not measured" in line]
    measured = [n for n in experiments(db) if n.startswith("tn.tune-")
                and n != "tn.tune-final"]
    assert len(refused) + len(measured) >= 3 and "best: trial" in out


@pytest.mark.integration
def test_a_resume_of_another_space_is_refused(tmp_path):
    require_engine()
    db = tmp_path / "r.db"
    status, out = invoke("tune", write(tmp_path, trials=2), "--db", db)
    assert status == 0, out
    spec = write(tmp_path, trials=3)
    spec.write_text(spec.read_text().replace("[1, 2]", "[1, 3]"))
    status, out = invoke("tune", spec, "--db", db, "--resume")
    assert status != 0 and "another space" in out, out


def test_a_knob_of_another_component_than_the_stacks_is_refused(tmp_path):
    spec = write(tmp_path)
    spec.write_text(spec.read_text().replace('"nginx.sendfile" = true',
                                             '"apache.mpm" = ["event", "worker"]'))
    status, out = invoke("tune", spec, "--dry-run")
    assert status != 0 and "tune.knobs.apache.mpm: not a knob of stack nginx" in out, out


def test_the_capacity_objective_reads_the_specs_goal(tmp_path):
    spec = write(tmp_path, extra='objective = "capacity"')
    spec.write_text(spec.read_text() + '\n[capacity]\nslo = "p99<20ms"\nstep = "1s"\n')
    status, out = invoke("tune", spec, "--dry-run")
    assert status == 0 and "for the highest capacity under p99<20ms" in out, out


BUDGET_SPEC = """
[experiment]
name = "tb"
repetitions = 1
duration = "3s"
warmup = "0.3s"
remeasure = 0

[load]
keepalive = true

[knobs.php-fpm]
pm = "static"

[tune]
trials = 3
final_repetitions = 2
memory = "{budget}M"
seed = {seed}

[tune.knobs]
"php-fpm.max_children" = [2, 40]

[matrix]
stack = ["nginx+php-fpm"]
workload = ["php-blank"]
concurrency = [4]
"""


@pytest.mark.integration
def test_a_pool_predicted_over_the_memory_budget_is_never_started(tmp_path):
    """The budget just above what a static pool of 2 holds (measured here first, by a
    plain run of it). The seed's first two picks are 40 static workers: the first is
    measured over the budget (the black-box constraint), the second is predicted over
    from it and never started (no experiment of it is stored), and no later trial of 40
    is started either; the search ends with its best within the budget."""
    require_engine()
    import optuna
    db = tmp_path / "r.db"
    small = tmp_path / "small.toml"
    small.write_text(BUDGET_SPEC.format(budget=1, seed=0).split("[tune]")[0]
                     .replace('name = "tb"', 'name = "small"')
                     + 'max_children = 2\n' + BUDGET_SPEC.split("[matrix]")[1]
                     .join(["[matrix]", ""]))
    status, out = invoke("run", small, "--db", db)
    assert status == 0, out
    store = Store.open(db)
    try:
        run = next(store.runs(store.experiment("small").id))
    finally:
        store.close()
    peak = run_peak_mib(run)          # the larger of PSS and the cgroup's charge
    assert peak is not None and run.resources.charged_mib is not None
    assert peak >= sum(c["pss_mib_peak"] for c in run.resources.components.values())
    spec = tmp_path / "tb.toml"
    spec.write_text(BUDGET_SPEC.format(budget=int(peak) + 6, seed=1))
    status, out = invoke("tune", spec, "--db", db)
    assert status == 0, out
    storage = f"sqlite:///{tmp_path / 'r.db.tune' / 'tb.optuna.db'}"
    trials = optuna.load_study(study_name="tb", storage=storage).get_trials()
    stored = set(experiments(db))
    big = [ft for ft in trials if ft.user_attrs["values"]["php-fpm.max_children"] == 40]
    started = [ft for ft in big if ft.user_attrs["experiment"] in stored]
    assert [ft.number for ft in started] == [0], out
    assert started[0].user_attrs["over_budget_mib"] > 0, out     # measured over
    assert all("over the budget" in ft.user_attrs["predicted"] for ft in big[1:]), out
    assert len(big) >= 2 and "trial 1: not started: predicted peak" in out, out
    assert "best: trial" in out and "php-fpm.max_children=2" in out, out
    assert "1 of 3 measured trial(s) over the budget" in out, out


@pytest.mark.integration
def test_the_quick_preset_finds_a_significantly_better_apache_than_the_defaults(tmp_path):
    """presets/tune-apache-files.toml with fewer trials: the search's best two measured
    again beside the defaults and one chosen on those runs; the chosen (Debian's
    EnableSendfile off, turned on among others) measured again beats the defaults with a
    significant verdict, the hand preset beside them in the same experiment."""
    require_engine()
    preset = Path(__file__).resolve().parent.parent / "presets" / "tune-apache-files.toml"
    spec = tmp_path / "tune-apache-files.toml"
    spec.write_text(preset.read_text().replace("trials = 12", "trials = 6")
                    .replace("final_repetitions = 6", "final_repetitions = 5")
                    .replace("seed = 1", "seed = 1\ncandidates = 2"))
    status, out = invoke("tune", spec, "--db", tmp_path / "r.db")
    assert status == 0, out
    chosen = re.search(r"^chosen: trial (\d+) \(medians measured again: trial \d+ [\d,.]+ "
                       r"req/s; trial \d+ [\d,.]+ req/s; tune-apache-files.tune-choose\)$",
                       out, re.M)
    assert chosen, out
    assert re.search(rf"^best: trial {chosen.group(1)}: ", out, re.M), out
    assert {"tune-apache-files.tune-choose", "tune-apache-files.tune-final"} <= set(
        experiments(tmp_path / "r.db"))
    said = re.search(r"against the defaults, measured again: req/s .*: (\w+)", out)
    assert said and said.group(1) == "better", out
    assert re.search(r"^best: trial \d+: .*apache.enable_sendfile=True", out, re.M), out
    assert "against the hand preset (apache.access_log=False " in out, out
    # each of the best's settings alone on the defaults, in the same experiment: what
    # export-config gives as each setting's reason
    assert "apache.enable_sendfile=True alone against the defaults: req/s" in out, out
    # better as a whole: every setting of it is supported, so all are written
    trial = re.search(r"its configuration: stacklab export-config (\w+) -o DIR", out).group(1)
    status, said = invoke("export-config", trial, "-o", tmp_path / "conf", "--db",
                          tmp_path / "r.db")
    assert status == 0, said
    readme = (tmp_path / "conf" / "README.txt").read_text()
    assert re.search(r"apache.enable_sendfile = True \(default False\): .*\n\s+alone: ",
                     readme), readme


def test_importances_come_with_their_interval_and_never_from_a_handful_of_trials():
    """Issue 40: a 4-trial search printed fANOVA importances as if they meant something.
    Under 10 trials none is estimated; from 10 on each comes with its bootstrap
    interval, and a knob that moves the objective 100× more than another is told apart
    from it."""
    import optuna

    from stacklab.commands.tune import importances
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def study_of(n: int):
        study = optuna.create_study(direction="maximize",
                                    sampler=optuna.samplers.RandomSampler(seed=1))
        study.optimize(lambda t: 10 * t.suggest_float("x", 0, 1)
                       + 0.1 * t.suggest_float("y", 0, 1), n_trials=n)
        return study
    assert importances(optuna, study_of(4)) == ({}, 4)
    found, n = importances(optuna, study_of(30))
    assert n == 30 and found["x"].share > 0.8 and found["x"].low > found["y"].high
    assert all(v.low <= v.share <= v.high for v in found.values())
