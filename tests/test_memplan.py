"""The memory plan's pure core (analysis/memplan.py): the budget's spelling, which knob
limits a stack's workers, the plan from two pools' figures, and the check's verdict."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stacklab.analysis.analyze import Estimate
from stacklab.analysis.memplan import (PLAN_SHARE, Figures, Point, WorkerLimit, check, parse_budget, plan,
                                       point, worker_limit)
from fakes import fake_load, load_report
from stacklab.errors import UsageError
from stacklab.store import RunRecord

LOAD = load_report(fake_load(1000.0, 2000.0, 1))

MIB = 2 ** 20


@pytest.mark.parametrize("text, mib", [
    ("512M", 512), ("512m", 512), ("512MB", 512), ("300MiB", 300), ("1G", 1024),
    ("1.5G", 1536), ("2g", 2048), ("1T", 1024 ** 2), (" 64 M ", 64), ("2048K", 2),
])
def test_budget_spellings(text, mib):
    assert parse_budget(text) == mib


@pytest.mark.parametrize("text, said", [
    ("512", "expected a size with its unit"), ("", "expected a size with its unit"),
    ("512X", "expected a size with its unit"), ("-1G", "expected a size with its unit"),
    ("100K", "a whole number of MiB"), ("0M", "at least 1"), ("1.3M", "whole number"),
])
def test_budget_refused_naming_the_flag_and_value(text, said):
    with pytest.raises(UsageError) as e:
        parse_budget(text)
    assert str(e.value).startswith(f"--memory {text!r}: ")
    assert said in str(e.value)


APACHE = "apache.max_request_workers"


@pytest.mark.parametrize("components, knobs, knob, per_process, unit", [
    (("apache",), {"apache.mpm": "prefork", "apache.php_handler": "mod_php"},
     APACHE, 1, "process"),
    (("apache", "mariadb"), {"apache.mpm": "prefork", "apache.php_handler": "mod_php"},
     APACHE, 1, "process"),
    (("apache",), {"apache.mpm": "itk"}, APACHE, 1, "process"),
    (("apache",), {"apache.mpm": "event", "apache.threads_per_child": 25}, APACHE, 25,
     "thread"),
    (("apache",), {"apache.mpm": "worker", "apache.threads_per_child": 16}, APACHE, 16,
     "thread"),
    (("nginx", "php-fpm"), {}, "php-fpm.max_children", 1, "child"),
    (("apache", "php-fpm", "mariadb"), {"apache.mpm": "event", "apache.php_handler": "fpm"},
     "php-fpm.max_children", 1, "child"),
    (("varnish", "apache"), {"apache.mpm": "prefork"}, APACHE, 1, "process"),
])
def test_which_knob_limits_the_workers(components, knobs, knob, per_process, unit):
    assert worker_limit(components, knobs) == WorkerLimit(knob, components[
        components.index(knob.split(".")[0])], per_process, unit)


@pytest.mark.parametrize("components, knobs, said", [
    (("nginx",), {}, "nginx: no worker limit to plan"),
    (("lighttpd",), {}, "no worker limit to plan"),
    (("apache",), {"apache.php_handler": "cgi"}, "apache.php_handler = 'cgi'"),
    (("apache",), {"apache.php_handler": "fcgid"}, "apache.php_handler = 'fcgid'"),
    (("apache",), {"apache.perl_handler": "cgi"}, "apache.perl_handler = 'cgi'"),
])
def test_stacks_without_a_limit_say_why(components, knobs, said):
    why = worker_limit(components, knobs)
    assert isinstance(why, str) and said in why


def pt(processes, per, pss, charged):
    """A pool's figures from one value each, or a list of repetitions."""
    as_list = lambda v: v if isinstance(v, list) else [v]   # noqa: E731
    return Point(processes, Estimate.of(as_list(per)), Estimate.of(as_list(pss)),
                 Estimate.of(as_list(charged)), len(as_list(pss)))


PREFORK = WorkerLimit(APACHE, "apache")


@pytest.mark.parametrize("small, large, budget, value, per, fixed", [
    # 4 → 16 workers: Σ PSS +12 (1 MiB each), charge +24 (2 each): charge decides;
    # fixed = 60 - 16 × 2 = 28; (0.85 × 512 - 28) / 2 = 203.6
    (pt(4, 5.0, 30.0, 36.0), pt(16, 2.0, 42.0, 60.0), 512, 203, 2.0, 28.0),
    # PSS growing faster than the charge (pages charged elsewhere): PSS decides;
    # fixed = 54 - 16 × 2 = 22; (0.85 × 100 - 22) / 2 = 31.5
    (pt(4, 5.0, 30.0, 20.0), pt(16, 2.0, 54.0, 30.0), 100, 31, 2.0, 22.0),
    # repetitions: the large pool's highest against the small one's lowest: 26 / 12 per
    # process, fixed 62 - 16 × 26 / 12 = 27.3; (435.2 - 27.3) / (26 / 12) = 188.2
    (pt(4, 5.0, [30.0, 31.0], [36.0, 38.0]), pt(16, 2.0, [42.0, 43.0], [60.0, 62.0]),
     512, 188, 26 / 12, 62 - 16 * 26 / 12),
    # a budget under the fixed part: nothing fits
    (pt(4, 5.0, 30.0, 36.0), pt(16, 2.0, 42.0, 60.0), 20, 0, 2.0, 28.0),
])
def test_plan_from_two_pools(small, large, budget, value, per, fixed):
    f = Figures(small, large)
    assert f.per_process_mib == pytest.approx(per)
    assert f.fixed_mib == pytest.approx(fixed)
    p = plan(PREFORK, budget, f, 20000)
    assert p.value == value
    assert (p.problem is None) == (value > 0)
    if value:
        assert p.planned_mib <= PLAN_SHARE * budget


def test_threads_are_planned_a_process_at_a_time():
    event = WorkerLimit(APACHE, "apache", 25, "thread")
    # 2 → 8 processes: 10 MiB each; fixed 100 - 80 = 20; (435.2 - 20) / 10 = 41 processes
    f = Figures(pt(2, 30.0, 40.0, 40.0), pt(8, 12.0, 100.0, 100.0))
    p = plan(event, 512, f, 20000)
    assert p.value == 41 * 25 and event.processes(p.value) == 41


def test_plan_capped_at_the_knob_maximum():
    f = Figures(pt(4, 1.0, 10.0, 10.0), pt(16, 0.5, 10.5, 10.5))
    p = plan(WorkerLimit("php-fpm.max_children", "php-fpm", 1, "child"), 4096, f, 1024)
    assert (p.value, p.capped) == (1024, True)


def test_no_slope_without_two_pool_sizes():
    p = plan(PREFORK, 512, Figures(pt(4, 5.0, 30.0, 36.0), pt(4, 5.0, 30.0, 36.0)), 20000)
    assert p.value == 0 and "no slope" in p.problem


def record(outcome="ok", components=None, machine=None, flags=(), reason=None):
    resources = dict(components or {})
    if machine is not None:
        resources["_machine"] = machine
    return RunRecord(experiment_id=1, trial_id="t", repetition=1, outcome=outcome,
                     reason=reason, started_at="s", ended_at="e", knobs={}, versions={},
                     configs={}, resources=resources, flags=flags,
                     load=LOAD if outcome == "ok" else None)


APACHE_RUN = {"apache": {"pss_mib_per_worker": 2.0, "pss_mib_peak": 40.0,
                         "processes_max": 17},
              "mariadb": {"pss_mib_peak": 90.0, "processes_max": 1}}


def test_point_from_runs():
    runs = [record(components=APACHE_RUN, machine={"memory_peak_bytes": 150 * MIB}),
            record("failed", reason="stack did not start")]
    p = point(runs, PREFORK)
    assert (p.processes, p.runs) == (16, 1)
    assert (p.per_process.median, p.pss.median, p.charged.median) == (2.0, 130.0, 150.0)


@pytest.mark.parametrize("runs, said", [
    ([record("failed")], "no run of it completed"),
    ([record(components={**APACHE_RUN, "mariadb": {"pss_mib_peak": None}},
             machine={"memory_peak_bytes": MIB})], "a load of 3 s or more"),
    ([record(components=APACHE_RUN)], "the cgroup's charge"),
])
def test_point_says_why_it_has_none(runs, said):
    why = point(runs, PREFORK)
    assert isinstance(why, str) and said in why


def check_of(machine, flags=(), outcome="ok", processes=17):
    comps = {"apache": {**APACHE_RUN["apache"], "processes_max": processes},
             "mariadb": APACHE_RUN["mariadb"]}
    return check([record(outcome, comps, machine, flags)], PREFORK, 16)


@pytest.mark.parametrize("c, failures", [
    (check_of({"memory_peak_bytes": 200 * MIB, "memory_oom_kills": 0}), []),
    (check_of({"memory_oom_kills": 2}), ["2 process(es) OOM-killed"]),
    (check_of({}, flags=("memory-limited",)), ["flagged memory-limited"]),
    (check_of({}, flags=("memory-pressure", "starved")), ["flagged memory-pressure"]),
    (check_of({}, flags=("error-responses",)), ["flagged error-responses"]),
    (check_of({}, processes=9), ["only 8 of the 16 worker processes ran"]),
    (check_of({}, outcome="failed"), ["1 run(s) failed, 0 ok"]),
    # at the limit without a stall: the group lived by reclaiming
    (check_of({"memory_peak_bytes": 470 * MIB}), ["charge reached 470.0 MiB, 92% of"]),
    (check_of({"memory_peak_bytes": 450 * MIB}), []),
])
def test_check_verdict(c, failures):
    said = c.failures(512)
    assert len(said) == len(failures)
    for got, want in zip(said, failures):
        assert want in got


def test_check_peak_at_the_budget_does_not_fit():
    c = check_of({"memory_peak_bytes": 120 * MIB})
    assert c.pss_peak_mib == 130.0 and c.charged_peak_mib == 120.0
    assert c.failures(512) == []
    assert "PSS peak 130.0 MiB reached the budget" in c.failures(128)[0]


def test_point_sets_a_disturbed_run_aside():
    """A run the host disturbed was measured again: the two quiet ones are the figures."""
    quiet = record(components=APACHE_RUN, machine={"memory_peak_bytes": 150 * MIB})
    busy = record(components={**APACHE_RUN, "mariadb": {"pss_mib_peak": 500.0}},
                  machine={"memory_peak_bytes": 600 * MIB}, flags=("host-busy",))
    p = point([quiet, replace(busy, repetition=2), replace(quiet, repetition=4)], PREFORK)
    assert p.runs == 2 and p.pss.values == (130.0, 130.0)


def test_point_reads_the_accounting_groups_charge_and_leaves_out_runs_short_of_memory():
    """The measuring pools run with no memory limit: the charge is the accounting
    group's. A run flagged short of memory or with an OOM kill held the limit, not
    the pool, and is left out of the slope."""
    def accounted(peak_mib, flags=(), machine=None):
        r = record(components=APACHE_RUN, machine=machine, flags=flags)
        resources = {**r.resources.to_json(),
                     "_accounting": {"cpu": "cgroup", "memory_peak_bytes": peak_mib * MIB}}
        return replace(r, resources=type(r.resources).from_json(resources))
    p = point([accounted(150), replace(accounted(400, flags=("memory-limited",)),
                                       repetition=2),
               replace(accounted(420, machine={"memory_oom_kills": 1}), repetition=3)],
              PREFORK)
    assert p.runs == 1 and p.charged.values == (150.0,)
