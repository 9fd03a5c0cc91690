"""Verdicts agree with the numbers: compare shows latency beside req/s and the trial ids
`show` prints; a side limited by the load engine or a busy host turns a ratio into a
bound; few repetitions give a range, never a "95% CI"; recommend names no variant
"best" without a significant difference from the default."""

from dataclasses import replace

import pytest
from rich.console import Console

from stacklab.analysis.analyze import Estimate, bound, bounded_verdict, compare_trials, load_view
from stacklab.commands import results
from stacklab.env import Environment
from stacklab.errors import NotFound
from stacklab.analysis.flags import PRESSURE
from stacklab.analysis.recommend import best_combinations, effects
from stacklab.report.headline import headlines
from stacklab.report.text import ci_header, ci_text, verdict_words
from stacklab.stacks import REGISTRY
from stacklab.analysis.stats import compare
from stacklab.store import Store

from fakes import fake_experiment


@pytest.fixture
def db(tmp_path):
    fake_experiment(tmp_path / "r.db", flag_apache_256=False)
    return tmp_path / "r.db"


@pytest.fixture
def view(db):
    store = Store.open(db)
    yield load_view(store, "fixed")
    store.close()


def trial(view, stack, c):
    return next(s for s in view.summaries if s.stack == stack and s.concurrency == c)


def on(console: Console) -> Environment:
    return replace(Environment.default(), stdout=console)


def printed(fn, *args) -> str:
    console = Console(width=250, record=True, color_system=None)
    fn(on(console), *args)
    return console.export_text()


def test_compare_shows_latency_beside_throughput(view):
    rows = {m.metric: m for m in compare_trials(trial(view, "apache", 1),
                                                trial(view, "nginx", 1))}
    assert list(rows)[:3] == ["req/s", "p50 ms", "p99 ms"]
    assert rows["req/s"].comparison.ratio == pytest.approx(2.0)
    assert rows["req/s"].comparison.significant          # 3 vs 3 can tell 2× apart
    assert rows["p50 ms"].comparison.ratio < 1           # nginx answers sooner
    assert all(m.bound is None for m in rows.values())


def test_show_and_compare_print_the_same_trial_ids(db, view):
    ids = [s.trial_id for s in view.summaries]
    shown = printed(results.show, "fixed", db)
    assert all(i in shown.split() for i in ids)
    a, b = trial(view, "apache", 1), trial(view, "nginx", 1)
    out = printed(results.compare, a.trial_id, b.trial_id[:11], db, None)   # a prefix will do
    assert a.trial_id in out and b.trial_id in out
    assert a.label in out and b.label in out
    assert f"trials of experiment fixed (id {view.id})" in out
    for metric in ("req/s", "p50 ms", "p99 ms"):
        assert metric in out


def test_an_unknown_trial_id_points_at_show(db):
    with pytest.raises(NotFound, match=r"no trial whose id starts with it.*`stacklab show"):
        results.compare(on(Console(record=True)), "zz", "ng", db, None)


def test_an_unknown_experiment_names_the_database_and_points_at_list(db):
    store = Store.open(db)
    with pytest.raises(NotFound) as e:
        store.experiment("nosuch")
    store.close()
    assert str(e.value) == (f"no experiment 'nosuch' in the results database {db}; "
                            "`stacklab list` lists its experiments")


def test_comparing_experiments_names_both_and_matches_trials_by_definition(tmp_path):
    fake_experiment(tmp_path / "r.db", name="before", flag_apache_256=False)
    fake_experiment(tmp_path / "r.db", name="after", flag_apache_256=False,
                    speed={"nginx": 30000.0, "apache": 10000.0})
    out = printed(results.compare, "before", "after", tmp_path / "r.db", None)
    assert ("B = after (experiment 2, the newer)  vs  A = before (experiment 1, the older)"
            in out)
    assert out.count("p99 ms") == 4 and "better +50.0%" in out    # nginx 1.5×, each c


@pytest.mark.parametrize("flag_a, flag_b, limited_is_low, relation", [
    ("generator-bound", None, True, "≤"),    # A could serve more: B/A could be smaller
    (None, "generator-bound", True, "≥"),    # B could serve more: B/A could be larger
    ("generator-bound", None, False, "≥"),   # A's latency could be lower: B/A larger
    (None, "generator-bound", False, "≤"),
    ("generator-bound", "generator-bound", True, "?"),
    (None, "generator-bound", None, "?"),    # CPU, memory: no known direction
])
def test_the_direction_of_a_bound(view, flag_a, flag_b, limited_is_low, relation):
    a = replace(trial(view, "apache", 1), flagged=(flag_a,) if flag_a else ())
    b = replace(trial(view, "nginx", 1), flagged=(flag_b,) if flag_b else ())
    found = bound(a, b, limited_is_low)
    assert found.relation == relation
    assert ("load engine" in found.why) == ("generator-bound" in (flag_a, flag_b))


@pytest.mark.parametrize("flag", ["memory-pressure", "io-pressure"])
def test_a_host_short_of_memory_or_busy_with_io_is_named_never_a_bound(view, flag):
    """Like other work on the CPUs, a disturbance of the host: the round's runs shared
    it and the pairing cancels what they shared; said beside the verdict, not a veto."""
    a = trial(view, "apache", 1)
    b = replace(trial(view, "nginx", 1), flagged=(flag,))
    assert bound(a, b, True) is None
    m = compare_trials(a, b)[0]
    assert m.decision.kind == "better"
    assert m.reach.why.startswith("B (") and PRESSURE[flag] in m.reach.why


def test_a_bound_keeps_a_verdict_only_when_it_points_the_same_way(view):
    a, b = trial(view, "apache", 1), trial(view, "nginx", 1)
    faster = compare(a.rps.values, b.rps.values)              # B = 2× A, significant
    b_held = bound(a, replace(b, flagged=("generator-bound",)), True)
    assert bounded_verdict(faster, b_held).startswith("+100.0%, a bound (≥ 2×): B (")
    a_held = bound(replace(a, flagged=("generator-bound",)), b, True)
    text = bounded_verdict(faster, a_held)
    assert text.startswith("no verdict, a bound (≤ 2×): A (")
    assert "was limited by the load engine" in text


def test_the_headline_says_a_ratio_against_a_limited_run_is_a_bound(tmp_path):
    fake_experiment(tmp_path / "f.db")               # apache c=16 is generator-bound
    store = Store.open(tmp_path / "f.db")
    view = load_view(store, "fixed")
    store.close()
    by_c = {h.concurrency: h.sentence(lambda s: s.label) for h in headlines(view)}
    assert by_c[1].startswith("nginx static-page c=1 wins: 2.00× the req/s of apache")
    assert by_c[16].startswith("no verdict: nginx static-page c=16 measured 2.00×")
    assert "limited by the load engine" in by_c[16] and "≤ 2.00×" in by_c[16]


def test_show_brief_answers_each_workload_and_concurrency_in_one_line(tmp_path):
    fake_experiment(tmp_path / "f.db")               # apache c=16 is generator-bound
    lines = printed(results.show, "fixed", tmp_path / "f.db", False, True).splitlines()
    assert lines == [
        # the fakes' runs step alike in every trial: paired round by round, exactly 2×
        "static-page c=1: nginx static-page vs apache static-page: 2.00× (95% CI "
        "2.00–2.00×) the req/s, better",
        "static-page c=16: nginx static-page vs apache static-page: ≤ 2.00× (95% CI "
        "2.00–2.00×) the req/s, no verdict (generator-bound)"]


def test_compare_brief_says_only_what_is_not_the_same(tmp_path):
    fake_experiment(tmp_path / "r.db", name="before", flag_apache_256=False)
    fake_experiment(tmp_path / "r.db", name="after", flag_apache_256=False,
                    speed={"nginx": 30000.0, "apache": 10000.0})
    out = printed(results.compare, "before", "after", tmp_path / "r.db", None, (), False,
                  None, False, True)
    lines = out.splitlines()
    nginx = [line for line in lines if line.startswith("nginx")]
    assert len(nginx) == 6 and all(line.endswith(", better") for line in nginx)
    assert "nginx static-page c=1, after (the newer) vs before: req/s 1.50× (95% CI" in nginx[0]
    # apache ran at the same speed: req/s and p50 the same within ±5%, not said; p99's
    # interval (two experiments: two samples, not paired) reaches past ±5%
    assert [line for line in lines if line.startswith("apache")] == [
        f"apache static-page c={c}, after (the newer) vs before: p99 ms 1.00× (95% CI 0.89–1.12×), "
        "no verdict (imprecise)" for c in (1, 16)]


def test_a_verdict_cell_is_the_decision_in_words(view):
    a, b = trial(view, "apache", 1), trial(view, "nginx", 1)
    rows = {m.metric: m for m in compare_trials(a, b)}
    assert verdict_words(rows["req/s"]) == "better +100.0%"
    assert verdict_words(rows["p50 ms"]).startswith("better -")      # lower is better
    held = {m.metric: m for m in compare_trials(replace(a, flagged=("generator-bound",)),
                                                b)}
    assert verdict_words(held["req/s"]) == "no verdict: generator-bound"
    same = {m.metric: m for m in compare_trials(a, a)}
    assert verdict_words(same["req/s"]) == "same"


@pytest.mark.parametrize("n, text", [(1, "—"), (3, "-1%…+1%"), (5, "-2%…+2%")])
def test_few_repetitions_give_a_range_not_a_ci(n, text):
    assert ci_text(Estimate.of([100.0 + i for i in range(n)])) == text


def test_the_interval_column_is_called_what_its_cells_are():
    few, many = Estimate.of([1.0, 2.0, 3.0]), Estimate.of([float(i) for i in range(1, 9)])
    assert ci_header([few, few]) == "range"
    assert ci_header([many]) == "95% CI"
    assert ci_header([few, many]) == "95% CI / range"
    assert ci_text(many).startswith("±")


def knob_view(view, sendfile_speedup: float):
    """nginx at c=1 with sendfile off (not the default) as a second trial."""
    base = trial(view, "nginx", 1)
    rps = Estimate.of([v * sendfile_speedup * (1 + (i - 1) / 1000)   # its own ±0.1%
                       for i, v in enumerate(base.rps.values)], base.rps.when)
    other = replace(base, trial_id="sf", knobs={**base.knobs, "nginx.sendfile": False},
                    rps=rps)
    return replace(view, summaries=[base, other])


def test_recommend_names_no_best_without_a_significant_difference(view):
    v = knob_view(view, 1.001)
    found = effects(v, REGISTRY)
    assert [e.verdict for e in found] == ["same within ±5%"]
    (best,) = best_combinations(v, REGISTRY, found)
    assert best.label(lambda s: s.label).startswith(
        "no significant difference from the default")


def test_recommend_names_a_significantly_faster_variant(view):
    v = knob_view(view, 1.5)
    found = effects(v, REGISTRY)
    assert found[0].verdict == "+50.0%"
    (best,) = best_combinations(v, REGISTRY, found)
    assert best.label(lambda s: s.trial_id) == "sf"


def test_recommend_carries_a_bound(view):
    v = knob_view(view, 1.5)
    v = replace(v, summaries=[replace(v.summaries[0], flagged=("generator-bound",)),
                              v.summaries[1]])
    (effect,) = effects(v, REGISTRY)
    assert effect.verdict.startswith("no verdict, a bound (≤ 1.5×)")
    assert not effect.hurts
    (best,) = best_combinations(v, REGISTRY, [effect])
    assert best.label(lambda s: s.trial_id).startswith("no verdict")


def test_a_large_change_is_said_as_a_multiple_everywhere_a_verdict_says_it():
    from stacklab.analysis.stats import signed_change
    from stacklab.report.fmt import change, vs
    assert [signed_change(r) for r in (1.2, 0.06, 2.99, 3.0, 348.78)] == [
        "+20.0%", "-94.0%", "+199.0%", "3×", "349×"]
    assert change(347.78) == "349×" and change(0.5) == "+50.0%"
    big = compare([100.0, 101.0, 99.0], [35000.0, 35100.0, 34900.0])
    assert big.verdict == "350×" and vs(big) == "350×"     # geometric means
    small = compare([100.0, 101.0, 99.0], [150.0, 151.0, 149.0])
    assert vs(small) == "1.50× (+50.0%)"


def test_compare_margin_judges_same_within_it_and_a_bad_one_is_named(tmp_path):
    """--margin: what "the same" may hide is the user's to say, for this comparison."""
    fake_experiment(tmp_path / "r.db", name="before", flag_apache_256=False)
    fake_experiment(tmp_path / "r.db", name="after", flag_apache_256=False,
                    speed={"nginx": 30000.0, "apache": 10000.0})
    wide = printed(results.compare, "before", "after", tmp_path / "r.db", None, (), False,
                   None, False, True, "15%").splitlines()
    assert [line for line in wide if line.startswith("apache")] == [   # p99 now the same
        f"apache static-page c={c}, after (the newer) vs before: the same on all 3 metrics"
        for c in (1, 16)]
    from stacklab.errors import UsageError
    with pytest.raises(UsageError) as e:
        printed(results.compare, "before", "after", tmp_path / "r.db", None, (), False,
                None, False, True, "5")
    assert str(e.value).startswith("--margin 5: 5 would be 5× (a fraction)")
