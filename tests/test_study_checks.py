"""Every check of every study plan, judged on stored runs made up for it: with B twice A
in the claim's direction the finding holds, with the sides swapped it is reversed, with
the same values on both sides it is not shown (a claim of no difference: holds, and
does not hold at twice), in both modes. So a check whose selectors do not name one trial
a side (at every level of a mean over levels), whose sum or mean is not what B/A reads,
whose metric is not its claim's, or whose sides are the other way round from its claim's
is seen before a study runs for an hour. The last is read from the claim's words: what
tells a check's two trials apart (a stack's part, the workload, the concurrency, a knob's
value, switches and numbers too) must be named by the claim on its own side more than on
the other, for every check; a check no word orients fails until its difference is named.

The runs are TrialSummary values for every trial the step plans, each metric filled the
way the store's summary fills it (analyze.summarize), so a check's selectors, its sums
and the verdict code are the real ones; only the numbers are chosen."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from stacklab.analysis.analyze import Estimate, ExperimentView, TrialSummary
from stacklab.stacks import REGISTRY, STACKS
from stacklab.studies.findings import STUDY_IDS, load_study
from stacklab.studies.plans import Sum, load_plan, matches, prepare
from stacklab.studies.verdict import (claim_band, direction_verdict, measure_check, same_band,
                                      size_verdict)
from stacklab.workloads import WORKLOADS

NOISE = (0.995, 1.0, 1.005)          # three runs a side, ±0.5%
BASE = 100.0


def values(level: float, shift: int = 0) -> list[float]:
    """Three runs around `level`; `shift` rotates the noise, so two equal sides are not
    the same list."""
    noise = NOISE[shift:] + NOISE[:shift]
    return [level * n for n in noise]


def summary(trial, level: float, metric: str, shift: int = 0) -> TrialSummary:
    """A stored trial whose `metric` is `level` (in the metric's unit), ±0.5%; the
    others too, but for bytes per response (MB/s × 1e6 / req/s), which takes a constant
    rate so that its MB/s can carry the level."""
    v = values(level, shift)
    est = Estimate.of
    rps = [1000.0] * len(v) if metric == "bytes" else v
    mbps = [x * r * 1e-6 for x, r in zip(v, rps)] if metric == "bytes" else v
    return TrialSummary(
        trial_id=trial.id, label=trial.label(), stack=trial.stack, workload=trial.workload,
        concurrency=trial.concurrency, knobs=dict(trial.knobs), runs_ok=len(v),
        runs_failed=0, rps=est(rps), mbps=est(mbps), latency_us=None,
        latency_runs_us={"p50": est([x * 1000 for x in v]), "p99": est([x * 1000 for x in v])},
        cpu_us_per_request={"server": est(v)}, server_cpu=est(v), engine_cpu_us_per_request=est(v),
        rss_mib_peak={"server": est(v)}, pss_mib_per_worker={}, errors=0, flagged=(),
        reasons=(), page_views={"repeat_bytes": est(v), "repeat_requests": est(v)})


def study_checks():
    """(study, step, check) for every check of every plan, in both modes (a mean over
    levels covers one level in most quick plans and all of them in the full ones)."""
    out = []
    for sid in STUDY_IDS:
        for quick in (True, False):
            mode = "quick" if quick else "full"
            for ps in prepare(load_plan(sid), quick, REGISTRY, STACKS, set(WORKLOADS)):
                out += [pytest.param(sid, ps, c, id=f"{sid}-{mode}-{c.finding}")
                        for c in ps.step.checks]
    return out


CHECKS = study_checks()


def tilt(trial, check, levels) -> float:
    """A factor per level of a mean over levels whose geometric mean is 1 (1.5, 1/1.5,
    1.5, …, the last making the product 1): the levels differ, their mean does not."""
    if not levels or check.mean_over is None:
        return 1.0
    i = levels.index(getattr(trial, check.mean_over[0]))
    if i < len(levels) - 1:
        return 1.5 if i % 2 == 0 else 1 / 1.5
    return 1 / math.prod(1.5 if j % 2 == 0 else 1 / 1.5 for j in range(len(levels) - 1))


def view_for(ps, check, factor: float) -> ExperimentView:
    """Every planned trial at BASE, except B's trials, set so that B = factor × A on the
    check's metric (a sum: its terms' net count taken into account; a mean over levels:
    A and B differ from level to level by factors whose geometric mean is 1, B's the
    square of A's, so only a true geometric mean gives `factor`)."""
    net = {side: sum(sign for sign, _ in check.terms(side)) for side in ("a", "b")}
    b_level = factor * BASE * net["a"] / net["b"]
    levels = check.levels(ps.plan.trials)
    b_ids = {t.id for _, sel in check.selectors("b", levels) for t in ps.plan.trials
             if matches(sel, t, REGISTRY)}
    summaries = [summary(t, b_level * tilt(t, check, levels) ** 2, check.metric, 1)
                 if t.id in b_ids else summary(t, BASE * tilt(t, check, levels), check.metric)
                 for t in ps.plan.trials]
    return ExperimentView(id=1, name=ps.step.name, description="", created_at="t",
                          status="complete", host={}, commit=None, versions={},
                          summaries=summaries, runs=[])


def judged(sid: str, ps, check, factor: float) -> str:
    study = load_study(sid)
    finding = study.finding(check.finding)
    m = measure_check(check, view_for(ps, check, factor), REGISTRY)
    assert not isinstance(m, str), m
    assert m.comparison.ratio == pytest.approx(factor, rel=0.02)
    band = claim_band(same_band(study.findings), finding.claim.ratio, m.then)
    return direction_verdict(finding.claim.direction, m, band)


@pytest.mark.parametrize("sid, ps, check", CHECKS)
def test_each_check_gives_each_verdict_on_made_up_runs(sid, ps, check):
    direction = load_study(sid).finding(check.finding).claim.direction
    if direction == "b=a":
        assert judged(sid, ps, check, 1.0) == "holds"
        assert judged(sid, ps, check, 2.0) == "does not hold"
        assert judged(sid, ps, check, 0.5) == "does not hold"
        return
    toward = 2.0 if direction == "b>a" else 0.5
    assert judged(sid, ps, check, toward) == "holds"
    assert judged(sid, ps, check, 1 / toward) == "reversed"
    assert judged(sid, ps, check, 1.0) == "not shown"


# A claim names a quantity; the check's metric is how it is measured: a claim on memory
# by the stack's peak RSS, one on bytes by the response's or a repeat view's.
MEASURED_BY = {"memory": {"rss"}, "bytes": {"bytes", "repeat_bytes"}}


@pytest.mark.parametrize("sid, ps, check", CHECKS)
def test_each_checks_metric_is_its_claims(sid, ps, check):
    claimed = load_study(sid).finding(check.finding).claim.metric
    assert check.metric in MEASURED_BY.get(claimed, {claimed})


@pytest.mark.parametrize("sid, ps, check", CHECKS)
def test_each_checks_sides_differ_and_name_planned_trials(sid, ps, check):
    """A and B share no trial (a check of a trial against itself can never hold)."""
    ids = {side: {t.id for _, sel in check.terms(side) for t in ps.plan.trials
                  if matches(sel, t, REGISTRY)} for side in ("a", "b")}
    assert ids["a"] and ids["b"] and ids["a"].isdisjoint(ids["b"])


def test_size_follows_the_made_up_ratio():
    """On a check with a ratio then, B at the study's own ratio is the same size, and
    at twice its distance from 1 stronger: the size verdict reads the check's numbers."""
    sid, ps, check = next((p.values for p in CHECKS if p.values[0] == "S4"
                           and p.values[2].finding == "static-100k-c50"))
    then = load_study(sid).finding(check.finding).claim.ratio
    for factor, size in ((then, "same size"), (then ** 2, "stronger now"),
                         (then ** 0.5, "weaker now")):
        m = measure_check(check, view_for(ps, check, factor), REGISTRY)
        assert size_verdict(then, m, "b>a") == size


# How the claims' prose names what tells two trials apart, by what differs: a component
# of one side's stack only, the workload, the concurrency, a knob both stacks have set to
# different values. A value missing here has no words (a check the others do not orient
# fails below, naming what differs). Claims say "raw", "same with keep-alive"; a word is
# matched whole, case aside, and a knob's "off" words are kept from matching its "on".
COMPONENT_WORDS = {
    "apache": ["apache"], "nginx": ["nginx"], "nginx-proxy": ["nginx"],
    "lighttpd": ["lighttpd"], "webfs": ["webfs", "boa"], "mini-httpd": ["mini-httpd", "thttpd"],
    "varnish": ["varnish"], "squid": ["squid"], "haproxy": ["haproxy", "balancer"],
    "apache-proxy": ["mod_cache", "mod_proxy"], "mod_php": ["mod_php"],
    "php-fpm": ["php-fpm", "fastcgi"], "fcgid": ["fcgid", "fastcgi"], "perl-cgi": ["cgi"],
    "mod_perl": ["ModPerl::Registry"], "mod_perl-perlrun": ["ModPerl::PerlRun"],
    "mariadb": ["mariadb", "mysql"], "memcached": ["memcached?"],
}
WORKLOAD_WORDS = {
    "static-page": ["static", "index.html"], "static-page:256": ["static"],
    "php-simple": ["simple.php"], "picture": ["picture.png"], "php-blank": ["blank"],
    "php-session": [r"session_start\(\)"], "editor-page": ["WYSIWYG"],
    "editor-page-min": ["minified"], "php-output-uncached": ["rendered on every request"],
    "php-output-cache": ["cached file"], "perl-page": ["Perl CGI page", "Perl page"],
    "portal-page": ["portal"], "photos": ["photos"], "php-uncacheable": ["uncacheable"],
}
KNOB_WORDS = {
    ("load.keepalive", True): [r"(?<!no )keep-alive"],
    ("load.keepalive", False): ["no keep-alive", "new connection"],
    ("apache.keepalive", True): ["KeepAlive On"], ("apache.keepalive", False): ["KeepAlive Off"],
    ("apache.tls", True): ["TLS"], ("apache.tls", False): ["raw"],
    ("nginx.tls", True): ["TLS"], ("nginx.tls", False): ["raw"],
    ("apache.deflate", True): ["mod_deflate", "gzip"],
    ("apache.deflate", False): ["uncompressed", "raw"],
    ("nginx.gzip", True): ["gzip"], ("nginx.gzip", False): ["uncompressed", "raw"],
    ("apache.expires", "off"): ["no Expires"], ("apache.expires", "1d"): [r"(?<!no )Expires"],
    ("apache.modules", "debian"): ["distribution's"],
    ("apache.modules", "minimal"): ["unneeded modules off", "only the modules"],
    ("php.opcache", True): [r"(?<!no )(?<!without an )opcode cache", "OPcache"],
    ("php.opcache", False): ["no opcode cache", "without an opcode cache"],
    ("php.session_auto_start", True): ["auto_start = 1"],
    ("php.session_auto_start", False): ["auto_start = 0"],
    ("php.session_dir", "run"): ["default directory"],
    ("php.session_dir", "nested"): ["another directory"],
    ("php.zlib_output_compression", True): ["compressed", "zlib.output_compression on"],
    ("php.zlib_output_compression", False): ["uncompressed"],
    ("mariadb.innodb_buffer_pool_size_mb", 128): ["default buffers"],
    ("mariadb.innodb_buffer_pool_size_mb", 256): ["sized to the data"],
    ("fs.type", "ext3"): ["ext3", "on disk"], ("fs.type", "tmpfs"): ["tmpfs", "ramdisk"],
    ("net.link", "100mbit"): ["100 Mbit"], ("net.link", "1gbit"): ["1 Gbit"],
    ("net.tcp_sack", "0"): ["TCP sysctls"],
    ("machine.cpu_quota", 0.5): ["weak(?:er)?"], ("machine.cpu_quota", 1.0): ["strong(?:er)?"],
    ("load.conditional", "none"): ["unconditional"], ("load.conditional", "etag"): ["conditional"],
    ("nginx.tls_session_cache", False): ["no session cache"],
    ("nginx.tls_session_cache", True): [r"(?<!no )(?:shared )?session cache"],
}
LEVEL_KNOBS = ("apache.deflate_level", "nginx.gzip_comp_level")      # "gzip level 9"
NAME_KNOBS = ("apache.mpm", "fs.type")                                # "prefork", "xfs"
# knob sections every trial has, whatever its stack
LAB_SECTIONS = ("load", "net", "fs", "machine")


def knob_words(key: str, value) -> list[str]:
    if (key, value) in KNOB_WORDS:
        return KNOB_WORDS[key, value]
    if key in LEVEL_KNOBS:
        return [f"level {value}"]
    return [str(value)] if key in NAME_KNOBS else []


def concurrency_words(n: int) -> list[str]:
    """c=50, 25 clients, 100 Apache processes; one client stands for an idle Apache (its
    start servers only: S2's and S4's notes say so)."""
    return [f"c={n}", f"{n} clients", rf"{n} (?:\w+ )?processes"] + (
        ["one client", "idle", "stopped"] if n == 1 else [])


def components(stack: str) -> set[str]:
    """The parts a stack expression names: 'nginx-proxy > apache+mod_php+mariadb' →
    nginx-proxy, apache, mod_php, mariadb (a replica count is not one)."""
    return {t for t in re.split(r"[\s>+*]+", stack) if t and not t.isdigit()}


def effective_knobs(trial) -> dict:
    """Every knob the trial's stack has, as it runs: declared defaults < the stack's
    defaults < what the stack fixes < the trial's own."""
    d = STACKS[trial.stack]
    out = {f"{owner}.{k}": v for owner in (*d.knob_owners, *LAB_SECTIONS)
           for k, v in REGISTRY.defaults(owner).items()}
    return out | d.defaults | d.knobs | dict(trial.knobs)


def words_apart(a, b) -> tuple[list[str], list[str], list[str]]:
    """The words that name trial `a` against `b`, those that name `b` against `a`, and
    what differs between them (for a failure's message)."""
    wa, wb, apart = [], [], []
    for own, other, words in ((a, b, wa), (b, a, wb)):
        for c in sorted(components(own.stack) - components(other.stack)):
            words += COMPONENT_WORDS.get(c, [re.escape(c)])
    if components(a.stack) != components(b.stack):
        apart.append(f"stack {a.stack} / {b.stack}")
    if a.workload != b.workload:
        wa += WORKLOAD_WORDS.get(a.workload, [])
        wb += WORKLOAD_WORDS.get(b.workload, [])
        apart.append(f"workload {a.workload} / {b.workload}")
    if a.concurrency != b.concurrency:
        wa += concurrency_words(a.concurrency)
        wb += concurrency_words(b.concurrency)
        apart.append(f"c={a.concurrency} / c={b.concurrency}")
    ka, kb = effective_knobs(a), effective_knobs(b)
    for key in sorted(ka.keys() & kb.keys()):
        if ka[key] != kb[key]:
            wa += knob_words(key, ka[key])
            wb += knob_words(key, kb[key])
            apart.append(f"{key} {ka[key]!r} / {kb[key]!r}")
    return wa, wb, apart


def said(text: str, words: list[str]) -> list[str]:
    return [w for w in words if re.search(rf"(?<![\w-]){w}(?!\w)", text, re.I)]


SUMMED = re.compile(r"\b(?:added|plus|sum)\b")


def orientation(claim, ps, check) -> list[str]:
    """What is wrong with the check's sides against its claim's A and B ([] when nothing):
    a side that is a sum of trials must be the claim's side that adds; plain sides must
    be named by their own claim's words more than by the other's, at each level of a mean
    over levels. Swapping A and B swaps the two counts, so a swapped check never passes."""
    if isinstance(check.a, Sum) or isinstance(check.b, Sum):
        return [f"side {side}: {'a sum' if isinstance(sel, Sum) else 'one trial'}, its "
                f"claim {text!r}" for side, sel, text in (("a", check.a, claim.a),
                                                          ("b", check.b, claim.b))
                if isinstance(sel, Sum) != bool(SUMMED.search(text))]
    levels = check.levels(ps.plan.trials)
    problems = []
    for (_, sel_a), (_, sel_b) in zip(check.selectors("a", levels), check.selectors("b", levels)):
        [a] = [t for t in ps.plan.trials if matches(sel_a, t, REGISTRY)]
        [b] = [t for t in ps.plan.trials if matches(sel_b, t, REGISTRY)]
        wa, wb, apart = words_apart(a, b)
        right = said(claim.a, wa) + said(claim.b, wb)
        wrong = said(claim.a, wb) + said(claim.b, wa)
        if len(right) <= len(wrong):
            problems.append(f"claim A {claim.a!r}, B {claim.b!r}; the trials differ in "
                            f"{'; '.join(apart) or 'nothing'}: its own words {right}, the "
                            f"other side's {wrong}")
    return problems


@pytest.mark.parametrize("sid, ps, check", CHECKS)
def test_no_checks_sides_are_swapped_against_its_claim(sid, ps, check):
    """Every check: what tells its two trials apart (a stack's part, the workload, the
    concurrency, a knob) is named by the claim on the check's own side more than on the
    other, or a sum of trials stands where the claim adds. A claim of no difference too,
    where a swap leaves the verdict but inverts the ratio. A check that no word orients
    fails here: name its difference in the tables above."""
    claim = load_study(sid).finding(check.finding).claim
    assert orientation(claim, ps, check) == []
    swapped = replace(check, a=check.b, b=check.a)
    assert orientation(claim, ps, swapped) != []


def test_a_no_difference_claim_holds_at_its_own_figure_in_the_report():
    """S2 calls 1 Gbit with keep-alive no difference at 1.08 and 1.05 real elsewhere:
    the report's rows judge today's 1.06 as holding, where S2's ±5% alone would not."""
    from stacklab.studies.verdict import rows
    param = next(p for p in CHECKS if p.id == "S2-quick-link-1g-keepalive")
    sid, ps, check = param.values
    study = load_study(sid)
    view = view_for(ps, check, 1.06)
    [row] = [r for r in rows(study.findings, {check.finding: (ps.step, check)},
                             {ps.step.name: view}.__getitem__, REGISTRY)
             if r.finding.id == check.finding]
    assert row.direction == "holds"
    assert direction_verdict("b=a", row.measured, same_band(study.findings)) != "holds"
