"""The tuner's two guards (issue 26): the known memory constraint — a trial predicted over
the budget from the trials measured so far is never started (analysis/tunebudget.py) —
and the Wilcoxon pruner over a trial's repetitions (commands/tune.pruning)."""

from __future__ import annotations

import pytest

from stacklab.analysis.memplan import WorkerLimit
from stacklab.analysis.tunebudget import Held, pool_of, predict, slope
from stacklab.commands.tune import Pruned, pruning
from stacklab.experiment.plan import PlannedRun, Trial
from stacklab.store import RunRecord

from fakes import fake_load, load_report

FPM = WorkerLimit("php-fpm.max_children", "php-fpm", 1, "child")
THREADS = WorkerLimit("apache.max_request_workers", "apache", 25, "thread")


def test_one_more_worker_costs_the_upper_slope_between_the_fewest_and_most():
    seen = [Held(4, 4, 60.0), Held(16, 16, 90.0), Held(16, 16, 96.0), Held(4, 4, 58.0)]
    assert slope(seen) == pytest.approx((96 - 58) / 12)
    # while every trial ran as many workers the slope is unknown (not one worker's PSS)
    assert slope([Held(8, 8, 70.0), Held(8, 8, 71.0)]) is None
    assert slope([]) is None


def test_a_larger_pool_is_predicted_over_and_a_measured_peak_is_never_undercut():
    seen = [Held(4, 4, 60.0), Held(16, 16, 90.0)]
    p = predict(FPM, 64, (), seen)
    assert p.processes == 64 and p.peak_mib == pytest.approx(90 + 2.5 * 48)
    assert "predicted peak 210 MiB over the budget 200 MiB" in p.said(200)
    assert predict(FPM, 16, (), seen).peak_mib >= 90.0
    assert predict(FPM, 2, (), seen).peak_mib < 60.0
    assert predict(FPM, 64, (), []) is None
    # one pool size measured: a larger pool holds at least its peak, a smaller one no less
    assert predict(FPM, 64, (), [Held(40, 40, 52.0)]).peak_mib == 52.0
    assert predict(FPM, 2, (), [Held(40, 40, 52.0)]) is None


def test_a_dynamic_pool_is_capped_at_what_it_ran_with_a_higher_limit():
    dynamic = (("php-fpm.pm", "'dynamic'"),)
    seen = [Held(4, 4, 60.0, dynamic), Held(128, 12, 100.0, dynamic)]
    # under the same load, a dynamic pool allowed 64 runs no more than one allowed 128
    assert predict(FPM, 64, dynamic, seen).processes == 12
    # a threaded MPM: processes of 25 threads
    assert predict(THREADS, 150, (), [Held(50, 2, 80.0)]).processes == 6


def test_only_trials_of_the_same_other_values_are_read():
    small_pool = (("mariadb.innodb_buffer_pool_size_mb", "64"),)
    large_pool = (("mariadb.innodb_buffer_pool_size_mb", "256"),)
    seen = [Held(60, 60, 700.0, large_pool), Held(8, 8, 250.0, small_pool)]
    # the buffer pools' 192 MiB is no cost of the 52 more workers
    assert predict(FPM, 40, small_pool, seen).peak_mib == 250.0     # at least its own
    assert predict(FPM, 40, (("mariadb.innodb_buffer_pool_size_mb", "128"),), seen) is None


def test_the_pool_is_every_searched_value_but_the_limit():
    values = {"php-fpm.pm": "static", "php-fpm.max_children": 8, "nginx.sendfile": True}
    assert pool_of(FPM, values) == (("nginx.sendfile", "True"), ("php-fpm.pm", "'static'"))


class Trial_:
    """An Optuna trial as the pruner's watch uses it: reports kept, prune when told."""

    def __init__(self, prune_after: int | None):
        self.reported: list[tuple[float, int]] = []
        self.prune_after = prune_after

    def report(self, value: float, step: int) -> None:
        self.reported.append((value, step))

    def should_prune(self) -> bool:
        return self.prune_after is not None and len(self.reported) >= self.prune_after


def run_and_record(rep: int, rps: float, flags=()) -> tuple[PlannedRun, RunRecord]:
    trial = Trial("nginx", "static-page", 8, (), ())
    record = RunRecord(experiment_id=1, trial_id=trial.id, repetition=rep, outcome="ok",
                       started_at="s", ended_at="e", knobs={}, versions={}, configs={},
                       load=load_report(fake_load(rps, 2000.0, rep)), flags=flags)
    return PlannedRun(trial, rep), record


def test_each_run_is_reported_at_its_repetition_and_a_pruned_trial_stops():
    t = Trial_(prune_after=2)
    watch = pruning(t, "rps", repetitions=5)
    watch(*run_and_record(1, 1000.0))
    with pytest.raises(Pruned, match="after 2 of 5 runs"):
        watch(*run_and_record(2, 900.0))
    assert [step for _, step in t.reported] == [1, 2]
    assert t.reported[0][0] == pytest.approx(1000.0, rel=0.01)


def test_a_disturbed_run_is_not_reported_and_the_last_run_is_never_pruned():
    t = Trial_(prune_after=1)
    watch = pruning(t, "rps", repetitions=2)
    watch(*run_and_record(1, 1000.0, flags=("host-busy",)))
    assert t.reported == []
    with pytest.raises(Pruned):
        watch(*run_and_record(1, 1000.0))
    watch(*run_and_record(2, 1000.0))      # the trial is whole: nothing left to save


def test_optunas_wilcoxon_pruner_stops_a_clearly_worse_trial_after_its_fourth_run():
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        pruner = optuna.pruners.WilcoxonPruner(p_threshold=0.1)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    best = study.ask()
    watch = pruning(best, "rps", repetitions=6)
    for rep in range(1, 7):
        watch(*run_and_record(rep, 1000.0 + rep))
    study.tell(best, 1003.0)
    worse = study.ask()
    watch = pruning(worse, "rps", repetitions=6)
    for rep in range(1, 4):        # one-sided p at n = 3 is 1/8, not below 0.1
        watch(*run_and_record(rep, 500.0 + rep))
    with pytest.raises(Pruned, match="after 4 of 6 runs"):
        watch(*run_and_record(4, 504.0))
    # as good as the best: never stopped
    same = study.ask()
    watch = pruning(same, "rps", repetitions=6)
    for rep in range(1, 7):
        watch(*run_and_record(rep, 1000.0 + rep))


def test_the_cpu_objective_sums_the_servers_cpu_per_request_run_by_run():
    from stacklab.analysis.analyze import summarize
    from stacklab.commands.tune import server_cpu
    from fakes import fake_resources

    def trial(cpu_s: float) -> object:
        runs = [RunRecord(experiment_id=1, trial_id="t", repetition=r, outcome="ok",
                          started_at="s", ended_at="e", knobs={}, versions={}, configs={},
                          load=load_report(fake_load(1000.0, 2000.0, r)),
                          resources=fake_resources("nginx", cpu_s * (1 + r / 100), 10.0))
                for r in range(1, 6)]
        return summarize({"stack": "nginx", "workload": "w", "concurrency": 8,
                          "knobs": {}}, "t", "t", runs)
    m = server_cpu(trial(2.0), trial(1.0))
    assert m.metric == "server CPU µs/req"
    assert m.comparison.median_b == pytest.approx(m.comparison.median_a / 2, rel=0.05)


def test_a_setting_alone_keeps_the_searched_knobs_it_acts_with():
    from types import SimpleNamespace

    from stacklab.commands.tune import Search
    from stacklab.experiment.tunespace import dimensions
    from stacklab.stacks import REGISTRY
    dims = dimensions(REGISTRY, {"nginx.gzip": True, "nginx.gzip_comp_level": [1, 5],
                                 "nginx.worker_processes": [1, 2]})
    best = {"nginx.gzip": True, "nginx.gzip_comp_level": 5, "nginx.worker_processes": 2}
    search = SimpleNamespace(dims=dims)
    assert Search.alone(search, "nginx.gzip_comp_level", best) == {
        "nginx.gzip": True, "nginx.gzip_comp_level": 5}
    assert Search.alone(search, "nginx.worker_processes", best) == {
        "nginx.worker_processes": 2}


def test_the_defaults_a_search_compares_with_are_the_stacks_own(tmp_path):
    from stacklab.commands.tune import defaults
    from stacklab.experiment.spec import parse_file_doc
    from stacklab.stacks import REGISTRY, STACKS
    from stacklab.workloads import WORKLOADS
    doc = {"experiment": {"name": "d", "duration": "3s"},
           "tune": {"knobs": {"apache.max_request_workers": {"min": 4, "max": 64}}},
           "matrix": {"stack": ["apache+mod_php+mariadb"], "workload": ["app-show"],
                      "concurrency": [8]}}
    spec = parse_file_doc(doc, tmp_path / "d.toml", REGISTRY, STACKS, set(WORKLOADS))
    fixed = defaults(spec)
    assert fixed["apache.mpm"] == "prefork"          # mod_php's, not Apache's event
    assert fixed["php.opcache"] is True                # the php group's knobs are there
