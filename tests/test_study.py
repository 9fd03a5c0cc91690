"""stacklab study: every study's plan validates whole in both modes and covers its
findings; the verdicts of a finding are a plain table; the report shows figures,
sources, today's ratio and the reasons; S3's quick study end to end on real servers."""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3

import pytest
from rich.console import Console

from stacklab.host import lab
from stacklab.analysis.analyze import (Bound, VERDICTS, Estimate, ExperimentView,
                                     TrialSummary, load_view, reach)
from stacklab.cli import main
from stacklab.commands.study import covered
from stacklab.env import Environment
from stacklab.errors import ExitStatus, SpecError
from stacklab.stacks import REGISTRY, STACKS
from stacklab.analysis.stats import Comparison, compare
from stacklab.stacks.php.install import handler_versions
from stacklab.store import BreakdownRecord, Outcome, Store
from stacklab.studies.findings import STUDY_IDS, load_study
from stacklab.studies.plans import (BreakdownStep, Check, Step, StudyPlan, load_plan,
                                     load_plan_file, prepare, prepare_breakdowns)
from stacklab.studies.verdict import (Measured, combined, direction_verdict,
                                      measure_breakdown, same_band, shares_text,
                                      size_verdict)
from stacklab.workloads import WORKLOADS

from helpers import require_engine

TWO_HOURS_S = 2 * 3600


def prepared(sid: str, quick: bool):
    return prepare(load_plan(sid), quick, REGISTRY, STACKS, set(WORKLOADS))


@pytest.mark.parametrize("sid", STUDY_IDS)
@pytest.mark.parametrize("quick", [False, True])
def test_each_plan_validates_whole_and_covers_its_findings(sid, quick):
    plan = load_plan(sid)
    covered(load_study(sid), plan)        # raises on a finding without check or reason
    steps = prepared(sid, quick)
    names = [ps.spec.experiment.name for ps in steps]
    assert len(names) == len(set(names))
    assert all(n.startswith(f"study-{sid.lower()}-") for n in names)
    assert all(n.endswith("-quick") == quick for n in names)


@pytest.mark.parametrize("sid", STUDY_IDS)
def test_the_full_study_fits_two_hours_and_quick_is_smaller(sid):
    full = sum(ps.plan.estimated_s(ps.spec) for ps in prepared(sid, False))
    quick = sum(ps.plan.estimated_s(ps.spec) for ps in prepared(sid, True))
    assert full <= TWO_HOURS_S, f"{sid} full: {full / 60:.0f} min"
    assert quick < full


@pytest.mark.parametrize("sid", STUDY_IDS)
def test_quick_keeps_at_least_three_runs_a_side(sid):
    for ps in prepared(sid, True):
        e = ps.spec.experiment
        assert e.auto or e.repetitions >= 3, ps.spec.experiment.name


def test_a_selector_must_match_exactly_one_trial():
    [step] = load_plan("S3").steps[1:2]
    bad = Check("tuned-static", "rps", {"stack": "apache"}, {"stack": "apache"})
    plan = StudyPlan("S3", "s3.toml", (Step(step.name, step.doc, step.quick, (bad,),
                                             step.scaling),))
    with pytest.raises(SpecError, match=r"check\[1\]\.a.*matches 2 trials"):
        prepare(plan, False, REGISTRY, STACKS, set(WORKLOADS))


def test_an_expressible_finding_without_a_check_is_refused():
    plan = load_plan("S3")
    fewer = StudyPlan(plan.study, plan.file, plan.steps[:2], plan.unmeasured)
    with pytest.raises(SpecError, match="memcache-sessions.*without a check"):
        covered(load_study("S3"), fewer)


def test_an_unmeasured_finding_with_its_reason_is_accepted():
    plan = load_plan("S3")
    fewer = StudyPlan(plan.study, plan.file, plan.steps[:2],
                      {"memcache-sessions": "why not"})
    covered(load_study("S3"), fewer)


def measured(ratio: float, ci: tuple[float, float], significant: bool) -> Measured:
    c = Comparison(1.0, ratio, ratio, ci, 0.01 if significant else 0.5, significant, (3, 3))
    return Measured("e", None, None, "rps", c, None)


@pytest.mark.parametrize("direction, ratio, ci, significant, verdict", [
    ("b>a", 2.0, (1.8, 2.2), True, "holds"),
    ("b>a", 0.5, (0.4, 0.6), True, "reversed"),
    ("b>a", 1.1, (0.9, 1.3), False, "not shown"),
    ("b<a", 0.5, (0.4, 0.6), True, "holds"),
    ("b<a", 1.5, (1.2, 1.8), True, "reversed"),
    ("b=a", 1.02, (0.95, 1.09), False, "holds"),
    ("b=a", 1.5, (1.3, 1.7), True, "does not hold"),
    ("b=a", 1.0, (0.6, 1.6), False, "not shown"),
])
def test_direction_verdict(direction, ratio, ci, significant, verdict):
    assert direction_verdict(direction, measured(ratio, ci, significant)) == verdict


@pytest.mark.parametrize("then, ci, size", [
    (2.97, (2.5, 3.2), "same size"),
    (2.97, (1.5, 2.0), "weaker now"),
    (2.97, (3.5, 4.0), "stronger now"),
    (0.53, (0.80, 0.90), "weaker now"),     # Squid: nearer 1 than the study's 0.53
    (0.53, (0.20, 0.30), "stronger now"),
    (0.53, (0.45, 0.60), "same size"),
    (2.97, (0.5, 0.6), ""),                 # reversed: no size to compare
    (None, (1.5, 2.0), ""),
])
def test_size_verdict_reads_distance_from_one_on_the_studys_side(then, ci, size):
    assert size_verdict(then, measured(sum(ci) / 2, ci, True)) == size


def test_no_size_without_a_direction_verdict_or_for_a_claim_of_no_difference():
    """A bound that left the direction without a verdict leaves its size unknown too; a
    "no difference" claim is judged by its band alone."""
    bounded = dataclasses.replace(measured(1.5, (1.4, 1.6), True),
                                  bound=Bound("?", "a side served errors", "errors"))
    assert size_verdict(2.97, bounded) == ""
    assert size_verdict(1.08, measured(1.5, (1.4, 1.6), True), "b=a") == ""


@pytest.mark.parametrize("own, band", [
    ((1.08,), (1 / 1.08, 1.08)),          # S2's "no difference" on the 1 Gbit link
    ((1.02,), (1 / 1.05, 1.05)),          # inside already: the study's band
    ((None,), (1 / 1.05, 1.05)),
    ((0.9, None), (0.9, 1 / 0.9)),        # either side of 1
    ((1.074, 1.08), (1 / 1.08, 1.08)),
])
def test_a_claim_of_no_difference_is_judged_in_a_band_that_holds_its_own_figure(own, band):
    from stacklab.studies.verdict import claim_band
    assert claim_band((1 / 1.05, 1.05), *own) == pytest.approx(band)


def test_the_no_difference_band_is_no_wider_than_the_studys_smallest_real_effect():
    """S1 calls the sysctls' +5% real, so S1's "no difference" is ±5%, and one
    measurement cannot make both claims hold; a study with no smaller effect keeps ±15%."""
    assert same_band(load_study("S1").findings) == pytest.approx((1 / 1.05, 1.05))
    assert same_band(load_study("S3").findings) == pytest.approx((1 / 1.15, 1.15))
    tight = measured(1.03, (1.02, 1.04), True)
    assert direction_verdict("b=a", tight, (1 / 1.05, 1.05)) == "holds"
    assert direction_verdict("b=a", measured(1.10, (1.08, 1.12), True),
                             same_band(load_study("S1").findings)) == "does not hold"
    assert direction_verdict("b>a", tight) == "holds" and size_verdict(1.05, tight) == "weaker now"


def summary(tid: str, p50_ms: list[float], flags: tuple[str, ...] = ()) -> TrialSummary:
    none = Estimate(None, None, ())
    return TrialSummary(
        trial_id=tid, label=tid, stack="nginx", workload="static-page", concurrency=1,
        knobs={}, runs_ok=len(p50_ms), runs_failed=0, rps=none, mbps=none, latency_us=None,
        latency_runs_us={"p50": Estimate.of([v * 1000 for v in p50_ms])},
        cpu_us_per_request={}, engine_cpu_us_per_request=none, rss_mib_peak={},
        pss_mib_per_worker={}, errors=0, flagged=flags, reasons=())


RAW, TLS, GZIP = [1.0, 1.1, 0.9], [3.0, 3.2, 2.8], [1.5, 1.6, 1.4]


@pytest.mark.parametrize("together, verdict", [
    ([3.5, 3.7, 3.3], "holds"),                    # the overheads add up
    ([7.0, 7.4, 6.6], "does not hold"),            # together costs twice the sum
])
def test_a_sum_of_trials_is_compared_run_by_run(together, verdict):
    terms = [(1, summary("tls", TLS)), (1, summary("gzip", GZIP)), (-1, summary("raw", RAW))]
    side, values, _ = combined(terms, "p50")
    assert values == pytest.approx([3.5, 3.7, 3.3])
    assert side.label == "(tls) + (gzip) − (raw)"
    c = compare(values, together)
    m = Measured("e", side, summary("both", together), "p50", c, None)
    assert direction_verdict("b=a", m) == verdict


def test_a_sum_carries_the_flags_of_its_terms():
    side, _, _ = combined([(1, summary("tls", TLS, ("host-busy",))), (1, summary("gzip", GZIP)),
                        (-1, summary("raw", RAW, ("generator-bound",)))], "p50")
    assert side.flagged == ("host-busy", "generator-bound")


def busy(tid: str, p50_ms: list[float], disturbance: float) -> TrialSummary:
    return dataclasses.replace(summary(tid, p50_ms, ("host-busy",)), disturbance=disturbance)


def test_a_sums_disturbance_is_its_terms_largest_unless_a_term_is_taken_away():
    """A busy host that slowed what is subtracted can move a difference by more than any
    one factor: that reach is not sized."""
    added, _, _ = combined([(1, busy("tls", TLS, 1.5)), (1, busy("gzip", GZIP, 1.2))], "p50")
    assert added.disturbance == 1.5
    taken, _, _ = combined([(1, summary("tls", TLS)), (-1, busy("raw", RAW, 1.2))], "p50")
    assert taken.disturbance == float("inf")
    quiet, _, _ = combined([(1, summary("tls", TLS)), (-1, summary("raw", RAW))], "p50")
    assert quiet.disturbance == 1.0


@pytest.mark.parametrize("slowdown", [1.0, 1.05, 1.5, float("inf")])
def test_a_busy_host_is_said_never_weighed(slowdown):
    """The interval is not widened by a worst case of what the host could have done (a
    1.5× bound used to veto a 1.3× effect measured within ±2%): the verdict is the
    interval's, and the busy side is named beside it."""
    fast, slow = [1.0, 1.02, 0.98, 1.01], [1.3, 1.32, 1.28, 1.31]
    a, b = summary("a", fast), busy("b", slow, slowdown)
    m = Measured("e", a, b, "p50", compare(fast, slow), None, reach=reach(a, b))
    assert direction_verdict("b>a", m) == "holds"
    assert (m.decision.kind, m.decision.reason) == ("worse", None)      # p50 up: worse
    assert m.interval == m.comparison.ci
    assert ("ran on a busy host" in m.verdict) == (slowdown > 1.0)


@pytest.mark.parametrize("near, verdict", [
    ([1.02, 1.03, 1.01, 1.02], "holds"),     # within ±15%
    ([1.30, 1.31, 1.29, 1.30], "does not hold"),
    ([0.9, 1.3, 1.1, 1.0], "not shown"),     # holds 1, reaches past the band
])
def test_a_claim_of_no_difference_is_judged_on_the_measured_interval(near, verdict):
    same = [1.0, 1.01, 0.99, 1.0]
    a, b = busy("a", same, 1.3), busy("b", near, 1.3)
    m = Measured("e", a, b, "p50", compare(same, near), None, reach=reach(a, b))
    assert direction_verdict("b=a", m) == verdict


def test_a_sum_needs_two_terms(tmp_path):
    bad = tmp_path / "s9.toml"
    bad.write_text('[[step]]\n[step.experiment]\nname = "x"\n[[step.check]]\n'
                   'finding = "f"\nmetric = "p50"\nb = { stack = "nginx" }\n'
                   'a = { plus = [ { stack = "nginx" } ] }\n')
    with pytest.raises(SpecError, match=r"check\[1\]\.a\.plus.*at least two"):
        load_plan_file(bad)


def record(i: int, db_ms: float, web_ms: float) -> BreakdownRecord:
    shares = [{"component": "database", "ms": db_ms, "percent": 60.0},
              {"component": "php", "ms": 0.1, "percent": 5.0},
              {"component": "web server (apache)", "ms": web_ms, "percent": 35.0},
              {"component": "network", "ms": None, "percent": None}]
    url = {"path": "/showArticle.php?show=1", "measurements": [
        {"keepalive": False, "shares": shares}, {"keepalive": True, "shares": shares}]}
    return BreakdownRecord("2026-11-26T00:00:00Z", "apache+mod_php+mariadb", "app-show", {},
                           {"urls": [url], "requests": 100, "repetitions": 3},
                           {"apache": "2.4.71", "stacklab": "0"}, {}, id=i)


STEP = BreakdownStep("overview-breakdown", "apache+mod_php+mariadb", "app-show",
                     a="web server", b="database")


def test_a_breakdown_check_compares_two_parts_over_the_fresh_stacks():
    records = [record(1, 0.9, 0.30), record(2, 1.0, 0.35), record(3, 0.95, 0.32)]
    m = measure_breakdown(STEP, records)
    assert m.comparison.ratio == pytest.approx(0.95 / 0.32, rel=0.05)
    assert m.comparison.significant and direction_verdict("b>a", m) == "holds"
    assert m.versions == {"apache": "2.4.71"}
    assert "database 0.95 ms (60%)" in shares_text(STEP, records)


def test_a_breakdown_without_the_part_says_so():
    net = BreakdownStep("f", "apache+mod_php+mariadb", "app-show", a="network", b="database")
    assert "no network part" in measure_breakdown(net, [record(1, 0.9, 0.3)])


def test_a_part_at_or_below_zero_gives_the_reason_not_a_ratio():
    """The web server's part is total − db − php: noise can take it to zero or below."""
    why = measure_breakdown(STEP, [record(1, 0.9, 0.3), record(2, 1.0, -0.02)])
    assert isinstance(why, str) and "web server part was -0.020 ms" in why


def test_s1_answers_its_overview_with_a_breakdown_and_validates_it():
    plan = load_plan("S1")
    assert [b.finding for b in plan.breakdowns] == ["overview-breakdown"]
    [planned] = prepare_breakdowns(plan, quick=True)
    assert (planned.plan.network, planned.plan.repetitions) == ("veth", 3)


@pytest.mark.parametrize("key, value, problem", [
    ("a", "apache", "expected one of database"),
    ("color", "red", "unknown key"),
])
def test_a_breakdown_entry_is_checked(tmp_path, key, value, problem):
    bad = tmp_path / "s9.toml"
    entry = {"finding": "f", "stack": "apache", "workload": "app-show", "a": "php",
             "b": "database", key: value}
    bad.write_text("[[breakdown]]\n" + "".join(f'{k} = "{v}"\n' for k, v in entry.items()))
    with pytest.raises(SpecError, match=rf"breakdown\[1\]\.{key}.*{problem}"):
        load_plan_file(bad)


def test_apache_php_handlers_record_their_package_version():
    versions = handler_versions({"mod_php", "fpm"})
    assert set(versions) == {"mod_php"}
    assert versions["mod_php"].split(".")[0].isdigit()


def test_unknown_study_is_one_clear_error(tmp_path):
    env = Environment(stdout=Console(record=True), stderr=Console(record=True),
                      clock=lambda: "t", db=tmp_path / "r.db", lab_root=tmp_path / "lab")
    assert main(["study", "S9"], env) == ExitStatus.BAD_INPUT
    assert "study 'S9': expected one of S1, S2, S3, S4, S5" in env.stderr.export_text()


def test_dry_run_prints_each_step_and_starts_nothing(tmp_path):
    env = Environment(stdout=Console(record=True, width=200), stderr=Console(record=True),
                      clock=lambda: "t", db=tmp_path / "r.db", lab_root=tmp_path / "lab")
    assert main(["study", "s3", "--quick", "--dry-run"], env) == ExitStatus.OK
    text = env.stdout.export_text()
    assert "study-s3-sessions-quick: 5 trials, 15 runs" in text
    assert not (tmp_path / "r.db").exists()


@pytest.mark.integration
def test_s3_quick_end_to_end_on_real_servers(tmp_path):
    """S3's quick study: three experiments on Apache+mod_php, Apache and nginx+PHP-FPM
    (with memcached), stored, then the study report with a row per finding."""
    require_engine()
    db = tmp_path / "r.db"
    env = Environment(stdout=Console(record=True, width=220), stderr=Console(record=True),
                      clock=lambda: "2026-01-01T00:00:00+00:00", db=db,
                      lab_root=lab.default_root())
    out = tmp_path / "s3.html"
    assert main(["study", "S3", "--quick", "-o", str(out)], env) == ExitStatus.OK
    text = env.stdout.export_text()
    findings = load_study("S3").findings
    measurable = [f for f in findings if f.not_expressible is None and not f.demonstration]
    assert f"{len(findings)} findings: {len(measurable)} measured" in text
    store = Store.open(db)
    try:
        for name in ("study-s3-sessions-quick", "study-s3-threads-quick",
                     "study-s3-memcache-quick"):
            view = load_view(store, name)
            assert view.status == "complete"
            assert all(r.outcome is Outcome.OK for r in view.runs), \
                [(r.trial_id, r.reason) for r in view.runs if r.outcome is not Outcome.OK]
    finally:
        store.close()
    html = out.read_text()
    for f in findings:
        assert f'id="finding-{f.id}"' in html
    assert "SEEDS.md § S3" in html and "2.2.19" in html
    assert "seeds/002_60cb8b6f359db973.txt" not in html     # the full text does not ship
    doc = json.loads(out.with_suffix(".json").read_text())
    assert [f["id"] for f in doc["findings"]] == [f.id for f in findings]
    assert all(f["verdict"] in VERDICTS for f in doc["findings"])
    # run again: everything is stored, nothing is measured twice
    again = Environment(stdout=Console(record=True, width=220), stderr=Console(record=True),
                        clock=lambda: "2026-01-01T00:00:00+00:00", db=db,
                        lab_root=lab.default_root())
    assert main(["study", "S3", "--quick", "-o", str(out)], again) == ExitStatus.OK
    assert "resuming: 15 of 15 runs already stored" in again.stdout.export_text()
    # a step whose stored runs ran with another default is not resumed: it starts anew
    conn = sqlite3.connect(db)
    with conn:
        [(exp_id,)] = conn.execute("SELECT id FROM experiments WHERE name = ?",
                                   ("study-s3-memcache-quick",))
        [(run_id, text)] = conn.execute("SELECT id, knobs_json FROM runs WHERE "
                                        "experiment_id = ? ORDER BY id LIMIT 1", (exp_id,))
        knobs = json.loads(text)
        knobs["php-fpm"]["max_children"] = 3
        conn.execute("UPDATE runs SET knobs_json = ? WHERE id = ?", (json.dumps(knobs), run_id))
        conn.execute("DELETE FROM runs WHERE experiment_id = ? AND id != ?", (exp_id, run_id))
    third = Environment(stdout=Console(record=True, width=220), stderr=Console(record=True),
                        clock=lambda: "2026-01-01T00:00:00+00:00", db=db,
                        lab_root=lab.default_root())
    assert main(["study", "S3", "--quick", "-o", str(out)], third) == ExitStatus.OK
    said = " ".join(third.stdout.export_text().split())
    assert "study-s3-memcache-quick: not resumed, started anew" in said
    assert "php-fpm.max_children = 3 when its runs were measured, 8 now" in said
    rows = conn.execute("SELECT e.id, COUNT(r.id) FROM experiments e LEFT JOIN runs r ON "
                        "r.experiment_id = e.id WHERE e.name = ? GROUP BY e.id ORDER BY e.id",
                        ("study-s3-memcache-quick",)).fetchall()
    assert len(rows) == 2 and rows[0] == (exp_id, 1) and rows[1][1] >= 1, rows


def test_report_only_as_json_prints_the_study_document_alone(tmp_path):
    """Nothing stored yet: every finding says so, in the one verdict vocabulary; stdout
    is the document alone, and the same document lies beside the HTML."""
    from stacklab.commands.study import study
    Store.open(tmp_path / "r.db").close()
    env = Environment(stdout=Console(record=True, width=200), stderr=Console(record=True),
                      clock=lambda: "t", db=tmp_path / "r.db", lab_root=tmp_path / "lab")
    out = tmp_path / "s3.html"
    assert study(env, "s3", True, None, out, False, True, as_json=True) == ExitStatus.OK
    doc = json.loads(env.stdout.export_text())
    assert doc == json.loads(out.with_suffix(".json").read_text())
    assert doc["study"] == "S3" and doc["quick"] is True
    assert {(f["status"], f["verdict"], f["reason"]) for f in doc["findings"]} == {
        ("not measured", "no-verdict", "no-data"), ("not expressible", "no-verdict", "no-data")}
    assert "experiment study-s3-sessions-quick not run yet" in doc["findings"][0]["why"]
    assert out.is_file()


def test_all_five_report_only_writes_one_report_over_the_five_and_each_studys(tmp_path):
    """`study all`: every study validated, each study's page and JSON beside one page and
    JSON over the five, whose counts are the sum of the studies' (nothing stored yet:
    every expressible finding is not measured, the rest not expressible)."""
    Store.open(tmp_path / "r.db").close()
    env = Environment(stdout=Console(record=True, width=240), stderr=Console(record=True),
                      clock=lambda: "t", db=tmp_path / "r.db", lab_root=tmp_path / "lab")
    out = tmp_path / "all.html"
    assert main(["study", "all", "--quick", "--report-only", "-o", str(out)], env) == \
        ExitStatus.OK
    doc = json.loads(out.with_suffix(".json").read_text())
    assert [s["study"] for s in doc["studies"]] == list(STUDY_IDS)
    for sid in STUDY_IDS:
        assert (tmp_path / f"study-{sid.lower()}-quick.html").is_file()
        findings = load_study(sid).findings
        gone = sum(f.not_expressible is not None for f in findings)
        assert doc["counts"][sid]["findings"] == len(findings)
        assert doc["counts"][sid]["not_expressible"] == gone
        assert doc["counts"][sid]["not_measured"] == len(findings) - gone
    assert doc["counts"]["all"]["findings"] == sum(len(load_study(s).findings)
                                                   for s in STUDY_IDS)
    html = out.read_text()
    assert 'href="study-s3-quick.html#finding-auto-start-off"' in html
    said = " ".join(env.stdout.export_text().split())
    assert "all five" in said and "report over the five" in said


def test_all_five_dry_run_plans_every_study_and_the_total(tmp_path):
    env = Environment(stdout=Console(record=True, width=240), stderr=Console(record=True),
                      clock=lambda: "t", db=tmp_path / "r.db", lab_root=tmp_path / "lab")
    assert main(["study", "all", "--quick", "--dry-run"], env) == ExitStatus.OK
    said = env.stdout.export_text()
    assert all(f"{sid}:" in said for sid in STUDY_IDS) and "all five: ~" in said


def at_levels(tid: str, stack: str, by_level: dict[int, list[float]]) -> list[TrialSummary]:
    return [dataclasses.replace(summary(f"{tid}{c}", p50), stack=stack, concurrency=c)
            for c, p50 in by_level.items()]


def test_a_mean_over_levels_is_the_geometric_mean_of_the_ratios_level_by_level():
    """S1 quotes nginx's photo ratio as a mean over its levels: a check with mean_over
    averages today's the same way, over the levels this mode stored, and sets it
    against the study's own ratio at those levels (then), not its mean over others."""
    from stacklab.studies.plans import Then
    from stacklab.studies.verdict import measure_check
    a = at_levels("a", "apache", {1: [1.0, 1.0, 1.0], 10: [1.0, 1.0, 1.0]})
    b = at_levels("b", "nginx", {1: [2.0, 2.1, 1.9], 10: [8.0, 8.4, 7.6]})
    view = ExperimentView(id=1, name="e", description="", created_at="t", status="complete",
                          host={}, commit=None, versions={}, summaries=a + b, runs=[])
    then = Then((1, 2, 10), (100.0, 100.0, 100.0), (300.0, 200.0, 500.0), "Tab. 1")
    check = Check("f", "p50", {"stack": "apache"}, {"stack": "nginx"},
                  mean_over=("concurrency", (1, 2, 10)), then=then)
    m = measure_check(check, view, REGISTRY)
    assert m.comparison.ratio == pytest.approx(4.0, rel=0.01)      # √(2 × 8)
    assert "geometric mean over concurrency 1, 10" in m.a.label
    assert m.then == pytest.approx((3 * 5) ** 0.5)                 # at 1 and 10 only
    assert m.then_source == "Tab. 1"


@pytest.mark.parametrize("check, key, problem", [
    ('mean_over = { workload = ["a", "b"] }', "mean_over", "one axis"),
    ("mean_over = { concurrency = [10] }", "mean_over.concurrency", "at least two"),
    ('mean_over = { concurrency = [1, 10] }\na = { stack = "x", concurrency = 1 }',
     "mean_over", "do not name a concurrency"),
    ('mean_over = { concurrency = [1, 10] }\n'
     'then = { levels = [1], a = [1], b = [2], source = "T" }', "then.levels", "missing at"),
    ('then = { levels = [1], a = [1, 2], b = [2], source = "T" }', "then", "one value"),
    ('then = { levels = [1], a = [0], b = [2], source = "T" }', "then.a", "positive"),
    ('a = { plus = [ { stack = "x" }, { stack = "y" } ] }\n'
     'then = { levels = [1], a = [1], b = [2], source = "T" }', "then", "no one level"),
])
def test_a_bad_mean_or_then_names_its_key(tmp_path, check, key, problem):
    bad = tmp_path / "s9.toml"
    a = "" if check.startswith("a = ") or "\na = " in check else 'a = { stack = "apache" }\n'
    bad.write_text('[[step]]\n[step.experiment]\nname = "x"\n[[step.check]]\n'
                   f'finding = "f"\nmetric = "rps"\nb = {{ stack = "nginx" }}\n{a}{check}\n')
    with pytest.raises(SpecError, match=rf"check\[1\]\.{re.escape(key)}.*{problem}"):
        load_plan_file(bad)


def test_a_quantity_per_unit_is_set_beside_the_studys():
    """S4 took 100 processes less 5 and divided: a check's `per` gives today's figure the
    same way, in the report's line and its JSON."""
    from stacklab.studies.plans import Per
    from stacklab.studies.report import sides_text
    from stacklab.studies.verdict import Row, measure_check
    few = dataclasses.replace(summary("a", [1.0]), stack="apache", concurrency=1)
    many = dataclasses.replace(summary("b", [1.0]), stack="apache", concurrency=100)
    few = dataclasses.replace(few, rss_mib_peak={"apache": Estimate.of([20.0, 20.0, 20.0])})
    many = dataclasses.replace(many, rss_mib_peak={"apache": Estimate.of([58.0, 58.0, 58.0])})
    view = ExperimentView(id=1, name="e", description="", created_at="t", status="complete",
                          host={}, commit=None, versions={}, summaries=[few, many], runs=[])
    check = Check("f", "rss", {"concurrency": 1}, {"concurrency": 100},
                  per=Per(95, "Apache process"))
    m = measure_check(check, view, REGISTRY)
    row = Row(load_study("S4").findings[0], "measured", measured=m)
    assert "(B − A) / 95 = 0.4 server RSS MiB per Apache process" in sides_text(row)


def test_a_then_without_the_level_a_mode_compares_is_refused(tmp_path):
    """A plain check compares the level its trials run at: the study's values must be
    there, or the size would be judged against another level's."""
    plan = tmp_path / "s3.toml"
    plan.write_text('[[step]]\n[step.experiment]\nname = "x"\nrepetitions = 3\n'
                    'duration = "1s"\n[step.matrix]\nstack = ["nginx", "apache"]\n'
                    'workload = ["static-page"]\nconcurrency = [10]\n[[step.check]]\n'
                    'finding = "f"\nmetric = "rps"\na = { stack = "apache" }\n'
                    'b = { stack = "nginx" }\n'
                    'then = { levels = [1, 50], a = [1, 1], b = [2, 2], source = "T" }\n')
    with pytest.raises(SpecError, match=r"check\[1\]\.then\.levels.*concurrency 10"):
        prepare(load_plan_file(plan, "S3"), False, REGISTRY, STACKS, set(WORKLOADS))


def test_a_studys_two_sides_of_one_experiment_are_compared_round_by_round():
    """A slow round hits both sides of a check alike (they ran in the same rounds): the
    check pairs them, as `compare` does, and the shared slow-down cancels."""
    rounds = [1.0, 2.0, 1.1, 1.6]                   # the host slowed rounds 2 and 4
    a_when = tuple((f"2026-12-07T10:0{k}:00", 1) for k in range(4))
    b_when = tuple((f"2026-12-07T10:0{k}:30", 1) for k in range(4))

    def side(tid, factor, when):
        s = summary(tid, [r * factor * (1 + 0.002 * k) for k, r in enumerate(rounds)])
        e = s.latency_runs_us["p50"]
        return dataclasses.replace(s, experiment="db#1",
                       latency_runs_us={"p50": Estimate(e.median, e.ci, e.values, when)})
    a, b = side("raw", 1.0, a_when), side("tls", 1.2, b_when)
    sa, va, wa = combined([(1, a)], "p50")
    sb, vb, wb = combined([(1, b)], "p50")
    assert wa == a_when and wb == b_when
    paired = compare(va, vb, when=(wa, wb))
    assert paired.paired == 4 and paired.ci[0] > 1.15       # 1.2× decided, round by round
    assert compare(va, vb).ci[0] < 1                        # as two samples: lost in the noise
