"""The vectorised bootstrap (issue 14): seeded, covering what a percentile interval of a
median covers, and a study-sized experiment summarized without a timed assertion (a busy
machine would make one flaky; bench/study_scale.py measures the time)."""

import random
import statistics

from fakes import VERDICTS, fake_report, fake_resources
from stacklab.analysis.analyze import load_view
from stacklab.analysis.stats import bootstrap_ci
from stacklab.store import Outcome, RunRecord, Store


def test_same_values_same_seed_same_interval():
    rng = random.Random(1)
    values = [rng.gauss(100, 10) for _ in range(12)]
    assert bootstrap_ci(values) == bootstrap_ci(list(values))
    assert bootstrap_ci(values, seed=7) == bootstrap_ci(values, seed=7)
    assert bootstrap_ci(values) == bootstrap_ci(values, seed=0)


def test_the_order_of_the_runs_does_not_change_the_interval():
    rng = random.Random(2)
    values = [rng.lognormvariate(0, 1) for _ in range(9)]
    assert bootstrap_ci(values) == bootstrap_ci(sorted(values, reverse=True))


def test_an_even_count_takes_the_mean_of_the_two_middle_values_as_statistics_does():
    values = [1.0, 2.0, 3.0, 10.0]
    lo, hi = bootstrap_ci(values)
    assert (lo, hi) == (1.0, 10.0)
    lo, hi = bootstrap_ci(values, stat=statistics.mean)     # another statistic, row by row
    assert 1.0 < lo < statistics.mean(values) < hi < 10.0
    assert bootstrap_ci(values, stat=statistics.mean) == (lo, hi)


def test_a_normal_median_is_covered_about_95_percent_of_the_time():
    # percentile bootstrap intervals of a median undercover a little at n = 20 (0.92
    # with this seed); 400 samples put the binomial noise near ±1.4%
    rng = random.Random(14)
    hits = sum(lo <= 100 <= hi for lo, hi in (
        bootstrap_ci([rng.gauss(100, 10) for _ in range(20)]) for _ in range(400)))
    assert 0.88 <= hits / 400 <= 0.99


def test_three_values_give_their_range_which_covers_three_quarters_of_the_time():
    rng, median, hits = random.Random(3), 0.6931471805599453, 0   # of Exp(1)
    for _ in range(400):
        values = [rng.expovariate(1) for _ in range(3)]
        lo, hi = bootstrap_ci(values)
        assert (lo, hi) == (min(values), max(values))
        hits += lo <= median <= hi
    assert 0.68 <= hits / 400 <= 0.82                       # 1 - 2^(1-3) = 0.75


def test_a_study_sized_experiment_of_540_runs_is_summarized(tmp_path):
    store = Store.open(tmp_path / "study.db")
    trials = [(f"t{i:04d}", f"nginx c={i}", {"stack": "nginx", "workload": "static-page",
                                             "concurrency": 1 + i % 64, "knobs": {}})
              for i in range(180)]
    exp = store.new_experiment("study", "study.toml", "h", {"experiment": {}}, trials,
                               {"cores": 2}, "0.1.0", None, "2026-01-01T00:00:00+00:00")
    loads = [fake_report(10000.0 * (1 + k / 100), 500.0, seed=k) for k in range(9)]
    for rep in range(1, 4):
        for n, (tid, _, _) in enumerate(trials):
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=tid, repetition=rep, outcome=Outcome.OK,
                started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:00:03",
                knobs={}, versions={"nginx": "1.0"}, configs={}, verdicts=VERDICTS,
                load=loads[(n + rep) % len(loads)],
                resources=fake_resources("nginx", 0.4 + n / 1000, 10.0 + rep)))
    view = load_view(store, "study")
    store.close()
    assert len(view.runs) == 540 and len(view.summaries) == 180
    for s in view.summaries:
        assert s.runs_ok == 3 and s.rps.is_range
        assert s.rps.ci == (min(s.rps.values), max(s.rps.values))
        # each fake histogram holds one value per completed request, as the engine's
        assert s.latency_us["count"] == sum(r.load.completed for r in view.runs
                                            if r.trial_id == s.trial_id)
