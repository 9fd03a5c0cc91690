"""Text output (Rich) of stored results: the summary table, comparisons and
recommendations; and the same results as JSON documents (`--json`, each described by a
schema in report/schemas/), built from the same computed records as the tables."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..analysis.analyze import (Bound, Estimate, ExperimentView, MetricComparison, TrialSummary,
                       compare_trials, same_definition_pairs)
from ..analysis.answered import WORDS, answer
from ..analysis.gate import Judgement, overall
from ..analysis.recommend import CAUTIONS, Best, Effect
from ..analysis.stats import Comparison
from ..experiment.gate import Threshold
from ..store.records import verdict_doc
from . import common_knobs, series_name
from .baseline import differences
from .capacitylines import capacity_lines
from .fmt import (DASH, Col, Fitted, Footnotes, ci_header, ci_text, change, ms, number,
                  p_cell, p_value, ratio_ci, times, vs)
from .headline import headlines


def summary_table(view: ExperimentView, notes: Footnotes | None = None) -> Fitted:
    """One row per trial: its name (and id), figures, and a mark to its footnote."""
    notes = notes or Footnotes()
    common = common_knobs(view.summaries)
    table = Fitted(f"{view.name} (experiment {view.id}, {view.status})", [
        Col("trial / id", words=True, key=True), Col("c", key=True), Col("runs"),
        Col("req/s"), Col(ci_header(s.rps for s in view.summaries).replace(" / ", "/\n")),
        Col("p50\nms"), Col("p99\nms"), Col("MB/s"), Col("srv CPU\nµs/req"),
        Col("errors")])
    for s in view.summaries:
        mark = notes.mark(s)
        runs = (f"{s.runs_ok}" + (f" +{s.runs_failed} failed" if s.runs_failed else "")
                + (f" +{s.runs_invalid} invalid" if s.runs_invalid else "") + mark)
        late = mark if s.latency_distorted else ""
        table.rows.append([f"{series_name(s, common)}\n{s.trial_id}",
                           str(s.concurrency), runs, number(s.rps.median), ci_text(s.rps),
                           ms(s.p50_us) + late, ms(s.p99_us) + late,
                           number(s.mbps.median, 1), number(s.server_cpu_us, 1),
                           str(s.errors)])
    return table


def print_summary(view: ExperimentView, console: Console) -> None:
    notes = Footnotes()
    console.print(summary_table(view, notes))
    common = common_knobs(view.summaries)
    if common:
        console.print("every trial: " + " ".join(f"{k}={v}" for k, v in sorted(common.items())))
    console.print("req/s: median of the repetitions with its 95% CI (from order "
                  "statistics, distribution-free; fewer than 6 "
                  "repetitions: their range, min…max relative to the median, which is no "
                  "95% interval); latency: percentiles of all runs' merged histograms; "
                  "srv CPU: every server process and its children (each component's cgroup, "
                  "CGI scripts included)", markup=False)
    for h in headlines(view):
        plural = "s" if h.concurrency != 1 else ""
        console.print(f"• {h.workload}, {h.concurrency} connection{plural}: "
                      f"{h.sentence(lambda s: series_name(s, common))}", markup=False)
    for note in notes.notes:
        console.print(note, style="yellow", markup=False)
    for s in view.summaries:
        for line in [*layer_lines(s), *condition_lines(s), *page_view_lines(s)]:
            console.print(line, markup=False)
        if s.tls:
            console.print(tls_line(s), markup=False)
        if s.protocol:
            console.print(protocol_line(s), markup=False)
        for line in agent_lines(s, series_name(s, common)):
            console.print(line, markup=False)
        for outcome, why in reason_parts(s):
            console.print(f"[red]{outcome}[/red] {s.label}: {why}")
    for line in capacity_lines(view):
        console.print(line, markup=False)


def tls_line(s: TrialSummary) -> str:
    """What TLS the engine negotiated, and its handshakes in the measured window."""
    t = s.tls
    shook = (f"{t['handshakes']:,} handshakes, {t['resumed']:,} resumed" if t["handshakes"]
             else "no handshake while measured (the connections were opened in warm-up "
                  "and kept)")
    return f"TLS {s.label}: {', '.join(t['protocols'])} {', '.join(t['ciphers'])}, {shook}"


def protocol_line(s: TrialSummary) -> str:
    """HTTP/2 asked: what the responses came in, and the streams per connection."""
    p = s.protocol
    streams = "stream" if p["streams"] == [1] else "streams"
    return (f"protocol {s.label}: responses in {', '.join(p['spoken'])} "
            f"(asked {', '.join(p['asked'])}), "
            f"{', '.join(map(str, p['streams']))} {streams} per connection")


def agent_lines(s: TrialSummary, name: str) -> list[str]:
    """A load from several agents: how together they started, and each one's share
    (medians over the runs); `name`: the trial's as the table says it."""
    a = s.agents
    if not a:
        return []
    skew = a["start_skew_us_max"]
    head = f"load agents of {name}: {a['count']}"
    if skew is not None:
        apart = f"{skew / 1000:.2f} ms" if skew >= 10 else f"{skew} µs"
        head += f", started at most {apart} apart, {a['overhead_s']:.2f} s spent beside each load"
    return [head] + [
        f"  {agent} ({fig['netns'] or fig['host']}): {fig['connections']} connections, "
        f"{fig['rps']:,.0f} req/s, engine busy {fig['busy']:.0%}, p99 "
        f"{fig['p99_us'] / 1000:,.2f} ms" for agent, fig in a["per_agent"].items()]


def reason_parts(s: TrialSummary) -> list[tuple[str, str]]:
    """Why runs of the trial failed or were invalid: ("failed", why), ("invalid", why)."""
    return [(outcome, why) for outcome, _, why in (r.partition(": ") for r in s.reasons)]


def layer_lines(s: TrialSummary) -> list[str]:
    """A cache's hit ratio and a balancer's spread, one line per front layer."""
    out = []
    for layer, fig in s.layers.items():
        parts = []
        if fig["hit_ratio"] is not None:
            parts.append(f"hit ratio {fig['hit_ratio'].median:.1%} "
                         f"(runs {min(fig['hit_ratio'].values):.1%}…"
                         f"{max(fig['hit_ratio'].values):.1%})")
        if fig["spread"]:
            parts.append("requests per replica " + ", ".join(
                f"{replica} {share:.0%}" for replica, share in fig["spread"].items()))
        out.append(f"{layer} in {s.label}: {'; '.join(parts)}")
    return out


def page_view_lines(s: TrialSummary) -> list[str]:
    """A page's first and repeat view by a client with a cache (pageview.py): requests
    over the wire and bytes received, medians of the runs."""
    v = s.page_views
    if not v:
        return []

    def view(name: str) -> str:
        n = v[f"{name}_requests"].median
        return (f"{name} view {n:g} request{'' if n == 1 else 's'}, "
                f"{v[f'{name}_bytes'].median:,.0f} B")

    views = "; ".join(view(name) for name in ("first", "repeat"))
    runs = len(v["first_bytes"].values)
    return [f"page views of {s.label} (a client with a cache, "
            f"{runs} run{'' if runs == 1 else 's'}): {views}"]


def condition_lines(s: TrialSummary) -> list[str]:
    """The network, filesystem and machine a trial ran on, where not the default."""
    c, parts = s.conditions, []
    if "net" in c:
        n = c["net"]
        parts.append(f"veth link {n.get('link')}, measured {n.get('rate_bytes_s', 0) / 1e6:,.1f}"
                     f" MB/s, RTT {n.get('rtt_ms')} ms"
                     + (f", sysctls {n['sysctls']}" if n.get("sysctls") else ""))
    if "fs" in c:
        f = c["fs"]
        parts.append(f"docroot on {f['type']} ({f['options'] or 'default options'}"
                     f"{', cold cache' if f['cold_cache'] else ''})")
    if "machine" in c:
        m = c["machine"]
        parts.append("machine " + ", ".join(f"{k} {v}" for k, v in m.items() if v))
    return [f"lab under {s.label}: {'; '.join(parts)}"] if parts else []


COMPARISON_NOTE = ("A, B: medians of the runs (p50/p99: the median of each run's own "
                   "percentile, not the merged histograms' that show prints); B/A: ratio of "
                   "geometric means, with its 95% CI and p from the t-test on log values, "
                   "paired round by round within an experiment (p < 0.05 exactly when the CI "
                   "excludes 1); ≥/≤: a side was limited, the ratio is a bound; verdict: "
                   "better, worse, same (the interval within the margin, ±5% unless the "
                   "experiment sets another) or no verdict with its reason (imprecise: it "
                   "holds 1 but reaches past the margin; ⚑: the trial's note below); errors: "
                   "failed requests over all the runs, counted, not compared")
RANK_NOTE = "MW p: Mann-Whitney U (5 or more runs a side), for information, not the verdict"


def _ratio(m) -> str:
    c, b = m.comparison, m.bound
    rel = f"{b.relation} " if b and b.relation != "?" else ""
    return DASH if c.ratio is None else f"{rel}{times(c.ratio, 3, '')}"


def verdict_words(m: MetricComparison) -> str:
    """The decision in a cell: "better +50.0%", "worse -33.3%", "same", "no verdict:
    generator-bound" (the reason code; the trial's note says it in words)."""
    d, c = m.decision, m.comparison
    if d.kind in ("better", "worse"):
        return f"{d.kind} {change(c.ratio - 1)}"
    return "same" if d.kind == "same" else f"no verdict: {d.reason}"


def _comparison_columns(first: list[Col], rank: bool) -> list[Col]:
    return [*first, Col("A"), Col("B"), Col("B/A", breaks=True), Col("95% CI"),
            Col("p"),
            *((Col("MW p", spare=True),) if rank else ()), Col("verdict", words=True)]


def _comparison_cells(m, rank: bool) -> list[str]:
    c = m.comparison
    decimals = 2 if "ms" in m.metric else 0 if m.metric == "req/s" else 1
    return [number(c.median_a, decimals), number(c.median_b, decimals), _ratio(m),
            ratio_ci(c.ci, 3, ""), p_cell(c.p), *((p_cell(c.p_rank),) if rank else ()),
            verdict_words(m)]


def _caption(rank: bool, distorted: bool) -> str:
    return (COMPARISON_NOTE + ("; " + RANK_NOTE if rank else "")
            + ("; ⚑ latency: a starved or Little's-law-flagged side's percentiles describe "
               "only the clients it served" if distorted else ""))


def _with_notes(table: Fitted, notes: Footnotes) -> Group:
    return Group(table, *(Text(n, style="yellow") for n in notes.notes))


def trials_table(view: ExperimentView, a: TrialSummary, b: TrialSummary) -> Group:
    """Two trials of one experiment, B against A: every metric, then each trial's note."""
    rows, notes = compare_trials(a, b), Footnotes()
    rank = any(m.comparison.p_rank is not None for m in rows)
    title = (f"trials of experiment {view.name} (id {view.id}):\n"
             f"B = {b.trial_id} {b.label}{notes.mark(b, 'B =')}\n"
             f"A = {a.trial_id} {a.label}{notes.mark(a, 'A =')}")
    table = Fitted(title, _comparison_columns([Col("metric", words=True, key=True)], rank),
                   caption=_caption(rank, a.latency_distorted or b.latency_distorted))
    table.rows = [[_metric(m.metric, a, b), *_comparison_cells(m, rank)] for m in rows]
    table.rows.append(["errors", *_errors_cells(a, b, rank)])
    return _with_notes(table, notes)


def _errors_cells(a: TrialSummary, b: TrialSummary, rank: bool) -> list[str]:
    """The errors row: each side's failed requests over its runs, no ratio (0 against 0
    has none, and a count is no rate)."""
    return [number(a.errors), number(b.errors), DASH, DASH, DASH, *((DASH,) if rank else ()),
            "" if a.errors == b.errors == 0 else "see the trials' errors"]


def _metric(metric: str, a: TrialSummary, b: TrialSummary) -> str:
    """A latency metric is marked ⚑ when either side's percentiles are distorted."""
    distorted = metric.startswith("p") and (a.latency_distorted or b.latency_distorted)
    return metric + (" ⚑" if distorted else "")


def experiments_table(a: ExperimentView, b: ExperimentView) -> Group:
    """Trials present in both experiments (same definition): req/s, p50 and p99, B
    against A, the trial named once per pair. The same definition gives the same trial
    id in both."""
    pairs, notes = measured_pairs(a, b), Footnotes()
    common = common_knobs(a.summaries)
    rank = any(m.comparison.p_rank is not None for _, _, compared in pairs for m in compared)
    distorted = any(x.latency_distorted for sa, sb, _ in pairs for x in (sa, sb))
    table = Fitted(f"B = {b.name} (experiment {b.id}, {newer(b, a)})  vs  A = {a.name} "
                   f"(experiment {a.id}, {newer(a, b)})",
                   _comparison_columns([Col("trial / id", words=True, key=True),
                                        Col("metric", words=True, key=True)], rank),
                   caption=_caption(rank, distorted))
    ends = []
    for sa, sb, compared in pairs:
        # the name, its id and its notes' marks, one to a row beside the metrics
        name = [f"{series_name(sa, common)} c={sa.concurrency}", sa.trial_id,
                f"{notes.mark(sa, 'A:')}{notes.mark(sb, 'B:')}".strip()]
        name = name[:len(compared) - 1] + [" ".join(name[len(compared) - 1:])]
        for n, m in enumerate(compared):
            table.rows.append([name[n] if n < len(name) else "",
                               _metric(m.metric, sa, sb), *_comparison_cells(m, rank)])
        table.rows.append(["", "errors", *_errors_cells(sa, sb, rank)])
        ends.append(len(table.rows) - 1)
    table.ends = frozenset(ends)
    if not pairs:
        table.caption = "no trial of A has the same definition as one of B"
    return _with_notes(table, notes)


def newer(x: ExperimentView, other: ExperimentView) -> str:
    """Whether x is the newer or the older of two experiments, by when each was created
    and id (B need not be the newer: `compare A B` takes them in the order given)."""
    return "the newer" if (x.created_at, x.id) >= (other.created_at, other.id) else "the older"


def measured_pairs(a: ExperimentView, b: ExperimentView
                   ) -> list[tuple[TrialSummary, TrialSummary, list[MetricComparison]]]:
    """Trials of A and B with the same definition, both measured, and B against A on
    req/s, p50 and p99: the rows of `compare A B`, as a table or as JSON."""
    pairs = [(sa, sb) for sa, sb in same_definition_pairs(a, b)
             if sa.rps.values and sb.rps.values]
    return [(sa, sb, [m for m in compare_trials(sa, sb)
                      if m.metric in ("req/s", "p50 ms", "p99 ms")]) for sa, sb in pairs]


# --brief: one line per question ------------------------------------------------------

def _ratio_words(m: MetricComparison) -> str:
    """"2.00× (95% CI 1.95–2.05×)", a bound's relation first."""
    c, b = m.comparison, m.bound
    rel = f"{b.relation} " if b and b.relation != "?" else ""
    return f"{rel}{times(c.ratio)}" + (f" (95% CI {ratio_ci(c.ci)})" if c.ci else "")


def _decided(m: MetricComparison) -> str:
    d = m.decision
    return d.kind if d.reason is None else f"no verdict ({d.reason})"


def _lines(lines: list[str]) -> Group:
    return Group(*(Text(line) for line in lines))


def brief_show(view: ExperimentView) -> Group:
    """`show --brief`: per workload and concurrency, each variant against its default
    and the leading trial against the next: by how much (req/s) and the verdict."""
    common = common_knobs(view.summaries)
    name = lambda s: series_name(s, common)  # noqa: E731
    out = []
    for h in headlines(view):
        where = f"{h.workload} c={h.concurrency}"
        for a in h.answers:
            out.append(f"{where}: {a.change} vs {a.against}: {_ratio_words(a.rps)} the "
                       f"{WORDS[a.rps.metric]}, {_decided(a.rps)}")
        if h.answers and not h.runner_up:
            continue
        if h.runner_up is None:
            out.append(f"{where}: {name(h.winner)}, {number(h.winner.rps.median)} req/s, "
                       "nothing to compare with")
            continue
        m = answer(h.runner_up, h.winner)   # req/s (a fixed rate: CPU), the leader as B
        out.append(f"{where}: {name(h.winner)} vs {name(h.runner_up)}: {_ratio_words(m)} "
                   f"the {WORDS[m.metric]}, {_decided(m)}")
    return _lines(out)


def _brief_pair(head: str, rows: list[MetricComparison]) -> list[str]:
    """One pair (`head` names it): a line per metric whose verdict is not "same" (one
    line saying so when every one is)."""
    said = [f"{head}: {m.metric} {_ratio_words(m)}, {_decided(m)}"
            for m in rows if m.decision.kind != "same"]
    return said or [f"{head}: the same on all {len(rows)} metrics"]


def brief_trials(a: TrialSummary, b: TrialSummary) -> Group:
    """`compare --brief` of two trials (B against A)."""
    return _lines(_brief_pair(f"{b.label} vs {a.label}", compare_trials(a, b)))


def brief_experiments(a: ExperimentView, b: ExperimentView) -> Group:
    """`compare --brief` of two experiments: each pair of trials of one definition."""
    common = common_knobs(a.summaries)
    lines = [line for sa, sb, compared in measured_pairs(a, b)
             for line in _brief_pair(f"{series_name(sa, common)} c={sa.concurrency}, "
                                     f"{b.name} ({newer(b, a)}) vs {a.name}", compared)]
    return _lines(lines or ["no trial of A has the same definition as one of B"])


def recommendations_tables(view: ExperimentView, effects, bests,
                           conditions: list[Effect] | None = None) -> list[Table]:
    """The settings' effects (recommendable), the lab's conditions' effects (reported,
    never recommended: recommend.conditions when not given) and the best combinations."""
    from ..analysis.recommend import behind_cache, conditions as condition_effects, starved
    from .headline import facts
    conditions = condition_effects(view) if conditions is None else conditions
    t = Table(title=f"{view.name}: effect of each server setting against its default, all "
                    "else equal (req/s)")
    for col in ("knob = value", "default", "stack / workload / c", "gain", "95% CI", "p",
                "verdict", "why (registry, study)"):
        t.add_column(col, justify="right" if col in ("gain", "p") else "left")
    for e in effects:
        c = e.comparison
        why = e.meaning + (f" [{e.source}]" if e.source else "")
        if e.knob in CAUTIONS:
            why += f" — caution: {CAUTIONS[e.knob]}"
        if e.trial is not None and e.knob.split(".", 1)[0] not in e.trial.layers and (
                hidden := behind_cache(e.trial)):
            why += f" — not measured: {hidden}"
        t.add_row(f"{e.knob} = {e.value}", str(e.default),
                  f"{e.stack} / {e.workload} / {e.concurrency}",
                  change(e.gain), ratio_ci(c.ci), p_value(c.p), e.verdict, why)
    t.caption = ("gain: ratio of geometric means - 1; its 95% CI and p from the t-test "
                 "on log req/s, paired round by round")
    if not effects:
        t.caption = ("no server setting was varied against its default with everything else "
                     "equal; add a knob axis that includes the default value")
    tables = [t]
    if conditions:
        k = Table(title="the lab's conditions: what each did to req/s against its default, "
                        "all else equal (what the stack was measured under, not a setting "
                        "to recommend)")
        for col in ("condition = value", "default", "stack / workload / c", "gain", "95% CI",
                    "p", "verdict", "measured"):
            k.add_column(col, justify="right" if col in ("gain", "p") else "left")
        for e in conditions:
            d = e.decision
            k.add_row(f"{e.knob} = {e.value}", str(e.default),
                      f"{e.stack} / {e.workload} / {e.concurrency}", change(e.gain),
                      ratio_ci(e.comparison.ci), p_value(e.comparison.p),
                      e.verdict if d.kind == "no-verdict" else d.kind,
                      "; ".join(facts(e.trial, {e.knob.split(".", 1)[0]})) if e.trial
                      else DASH)
        tables.append(k)
    b = Table(title="best combination per stack, workload and concurrency"
                    + (" (under each set of the lab's conditions)"
                       if any(best.under for best in bests) else ""))
    for col in ("stack / workload / c", "best variant", "req/s", "vs defaults",
                "vs best single change"):
        b.add_column(col)
    common = common_knobs(view.summaries)
    for best in bests:
        under = ", ".join(f"{key}={value}" for key, value in best.under)
        b.add_row(f"{best.stack} / {best.workload} / {best.concurrency}"
                  + (f" under {under}" if under else ""),
                  best.label(lambda s: series_name(s, common)), number(best.trial.rps.median),
                  vs(best.over_default),
                  (vs(best.over_best_single) + f" ({best.best_single.knob} = "
                   f"{best.best_single.value})") if best.best_single else DASH)
    starving = starved(view)
    if starving:
        w = Table(title="clients left waiting for a worker (starved): the setting to try")
        for col in ("trial", "runs starved", "likely cause and setting"):
            w.add_column(col)
        for s, why in starving:
            runs = next((d for f, d in s.flag_details if f == "starved"), "")
            w.add_row(s.label, runs.split(";", 1)[0], "; ".join(why))
        tables.append(w)
    return [*tables, b]


# JSON documents: what the tables above show, as data (report/schemas/*.schema.json) ---

# Each document's version, bumped when a field changes (recommend's: recommend.py)
SHOW_VERSION = 5        # of show --json (schemas/show.schema.json)
COMPARE_VERSION = 4     # of compare --json (schemas/compare.schema.json)
# compare_trials names its metrics for the table; the JSON names them with their unit
METRIC_KEYS = {"req/s": "rps", "p50 ms": "p50_ms", "p99 ms": "p99_ms", "MB/s": "mbps",
               "engine CPU µs/req": "engine_cpu_us_per_request",
               "server CPU µs/req": "server_cpu_us_per_request",
               "CPU µs/req": "cpu_us_per_request", "RSS MiB": "rss_mib_peak"}


def show_doc(view: ExperimentView) -> dict:
    """`show --json` (schemas/show.schema.json): each trial's figures, flags, verdicts
    and errors, and the headline per workload and concurrency: the leading trial against
    the next, decided as `compare` decides (req/s, the leader as B)."""
    common = common_knobs(view.summaries)
    return {"schema_version": SHOW_VERSION, "experiment": _experiment(view),
            "common_knobs": common,
            "trials": [_trial_doc(s, common) for s in view.summaries],
            "headlines": [_headline_doc(h, common) for h in headlines(view)]}


def _headline_doc(h, common: dict) -> dict:
    m = compare_trials(h.runner_up, h.winner)[0] if h.runner_up else None
    return {"workload": h.workload, "concurrency": h.concurrency,
            "leader": h.winner.trial_id,
            "other": h.runner_up.trial_id if h.runner_up else None,
            "rps": _compared(m.comparison) if m else None,
            "bound": _bound_doc(m.bound) if m else None,
            **(m.decision.doc() if m else {"verdict": None, "reason": None}),
            "answers": [_answer_doc(a) for a in h.answers],
            "text": h.sentence(lambda s: series_name(s, common))}


def _answer_doc(a) -> dict:
    """A variant against its default (headline.Answer): what changed, the two trials,
    their req/s and the decision."""
    return {"change": a.change, "against": a.against, "base": a.base.trial_id,
            "trial": a.trial.trial_id, "knob": a.knob, "condition": a.condition,
            "facts": list(a.facts), "rps": _compared(a.rps.comparison),
            "bound": _bound_doc(a.rps.bound), **a.rps.decision.doc(),
            "text": a.sentence()}


def _experiment(view: ExperimentView) -> dict:
    return {"id": view.id, "name": view.name, "status": view.status}


def _trial_doc(s: TrialSummary, common: dict) -> dict:
    return {
        "trial_id": s.trial_id, "label": s.label, "series": series_name(s, common),
        "stack": s.stack, "workload": s.workload, "concurrency": s.concurrency,
        "knobs": s.knobs, "runs_ok": s.runs_ok, "runs_failed": s.runs_failed,
        "runs_invalid": s.runs_invalid, "runs_set_aside": s.runs_set_aside,
        "disturbance": _finite(s.disturbance), "busy_ratio": s.busy_ratio,
        "rps": _estimate(s.rps),
        "latency_us": ({"p50": s.p50_us, "p99": s.p99_us} if s.latency_us else None),
        "latency_distorted": s.latency_distorted, "mbps": s.mbps.median,
        "server_cpu_us_per_request": s.server_cpu_us, "errors": s.errors,
        "flags": [{"flag": name, "detail": detail} for name, detail in s.flag_details],
        "verdicts": [verdict_doc(v) for v in s.verdicts],
        "reasons": [{"outcome": outcome, "why": why} for outcome, why in reason_parts(s)],
        "layers": {layer: {"hit_ratio": _estimate(fig["hit_ratio"]) if fig["hit_ratio"]
                           else None, "replica_shares": fig["spread"]}
                   for layer, fig in s.layers.items()},
        "conditions": s.conditions, "tls": s.tls, "protocol": s.protocol, "agents": s.agents,
        "capacity": _estimate(s.capacity) if s.capacity.values else None}


def _finite(x: float) -> float | None:
    """JSON has no infinity: an unsized factor (a window not read) is null."""
    return None if x == float("inf") else x


def _estimate(e: Estimate) -> dict:
    """A median over repetitions with its interval, said as what it is: a 95% CI (order
    statistics) from 6 values, their min–max range below that, none under 2."""
    return {"median": e.median, "interval": list(e.ci) if e.ci else None,
            "interval_kind": None if not e.ci else "range" if e.is_range else "ci95",
            "repetitions": len(e.values)}


def _comparison(c: Comparison) -> dict:
    """A comparison's figures; its verdict goes beside them, from a Decision."""
    return {"median_a": c.median_a, "median_b": c.median_b, "ratio": c.ratio,
            "ci95": list(c.ci) if c.ci else None, "p": c.p, "p_rank": c.p_rank,
            "runs": list(c.n), "paired": c.paired}


def _bound(b: Bound | None) -> dict | None:
    return {"relation": b.relation, "why": b.why} if b else None


def _compared(c: Comparison) -> dict:
    """B against A as figures: what decides is the decision beside it (decision_doc),
    never a significance flag of its own."""
    return {"median_a": c.median_a, "median_b": c.median_b, "ratio": c.ratio,
            "ci95": list(c.ci) if c.ci else None, "p": c.p, "p_rank": c.p_rank,
            "runs": list(c.n), "paired": c.paired}


def _bound_doc(b: Bound | None) -> dict | None:
    return {"relation": b.relation, "reason": b.reason, "why": b.why} if b else None


def decision_doc(m: MetricComparison) -> dict:
    """The one verdict vocabulary (analyze.VERDICTS): better, worse, same or no-verdict
    with its reason code (analyze.REASONS), and the words the table says."""
    return {**m.decision.doc(), "text": m.verdict}


def _reach_doc(m: MetricComparison) -> dict | None:
    """Which sides ran on a busy host: their worst-case slow-down factors (≥ 1, null: not
    sized) and the words; said, never used to widen the interval (`interval` is the
    measured one since show schema 5)."""
    r, c = m.reach, m.comparison
    if r is None:
        return None
    return {"a": _finite(r.a), "b": _finite(r.b),
            "interval": [_finite(x) for x in c.ci] if c.ci else None, "why": r.why}


def _metric_row(m: MetricComparison, a: TrialSummary, b: TrialSummary) -> dict:
    """A row of B/A: the metric by key (and component: "nginx CPU µs/req" is
    cpu_us_per_request of nginx), its comparison, bound, reach and decision."""
    component, _, name = (("", "", m.metric) if m.metric in METRIC_KEYS
                          else m.metric.partition(" "))
    return {"metric": METRIC_KEYS[name], "component": component or None,
            **_compared(m.comparison), "bound": _bound_doc(m.bound),
            "reach": _reach_doc(m), **decision_doc(m),
            "latency_distorted": name.startswith("p") and (a.latency_distorted
                                                           or b.latency_distorted)}


def trials_doc(view: ExperimentView, a: TrialSummary, b: TrialSummary) -> dict:
    """`compare --json` of two trials of one experiment (schemas/compare.schema.json)."""
    side = lambda s: {"experiment_id": view.id, "experiment": view.name,  # noqa: E731
                      "trial_id": s.trial_id, "label": s.label}
    return {"schema_version": COMPARE_VERSION, "compared": "trials", "a": side(a),
            "b": side(b), "rows": [{"trial_id": a.trial_id, **_metric_row(m, a, b)}
                                   for m in compare_trials(a, b)]}


def experiments_doc(a: ExperimentView, b: ExperimentView) -> dict:
    """`compare --json` of two experiments, trial by trial (as experiments_table)."""
    common = common_knobs(a.summaries)
    return {"schema_version": COMPARE_VERSION, "compared": "experiments",
            "a": {"experiment_id": a.id, "experiment": a.name},
            "b": {"experiment_id": b.id, "experiment": b.name},
            "rows": [{"trial_id": sa.trial_id, "series": series_name(sa, common),
                      "concurrency": sa.concurrency, **_metric_row(m, sa, sb)}
                     for sa, sb, compared in measured_pairs(a, b) for m in compared],
            "differences": [d.doc() for d in differences(a, b)]}


def gate_doc(limits: list[Threshold], strict: bool, judged: list[Judgement]) -> dict | None:
    """`compare --json --fail-if`: each threshold's judgement and the gate's outcome
    (gate.OUTCOMES, or "nothing-judged": no pair of trials, an error exit)."""
    if not limits:
        return None
    return {"strict": strict,
            "outcome": overall(judged, strict) if judged else "nothing-judged",
            "judgements": [{"threshold": str(j.threshold), "metric": j.threshold.metric,
                            "limit_ratio": j.threshold.limit, "base": j.base, "new": j.new,
                            "ratio": j.ratio, "ci95": list(j.ci) if j.ci else None,
                            "reach": [None if x == float("inf") else x for x in j.reach]
                            if j.reach else None,     # null: open (a bound)
                            "outcome": j.outcome, "reason": j.reason, "why": j.why or None}
                           for j in judged]}


def recommendations_doc(view: ExperimentView, effects: list[Effect], bests: list[Best],
                        conditions: list[Effect] | None = None) -> dict:
    """`recommend --json` (schemas/recommend.schema.json, recommend.SCHEMA_VERSION): the
    settings' effects in the tables' order (ranked: a verdict first, then by gain), the
    lab's conditions' effects apart (recommend.conditions when not given: never
    recommended), and the best combinations. Verdicts in the one vocabulary
    (better|worse|same|no-verdict with a reason), the words beside them as "text"."""
    from ..analysis.recommend import SCHEMA_VERSION as RECOMMEND_VERSION
    from ..analysis.recommend import conditions as condition_effects
    from .headline import facts
    conditions = condition_effects(view) if conditions is None else conditions
    common = common_knobs(view.summaries)
    name = lambda s: series_name(s, common)  # noqa: E731


    def effect(e: Effect) -> dict:
        return {"knob": e.knob, "value": e.value, "default": e.default, "stack": e.stack,
                "workload": e.workload, "concurrency": e.concurrency,
                "trial_id": e.trial.trial_id if e.trial else None, "gain": e.gain,
                "rps": _comparison(e.comparison), "bound": _bound(e.bound),
                **e.decision.doc(), "text": e.verdict, "meaning": e.meaning,
                "source": e.source}

    return {"schema_version": RECOMMEND_VERSION, "experiment": _experiment(view),
            "effects": [{"rank": n, **effect(e), "caution": CAUTIONS.get(e.knob)}
                        for n, e in enumerate(effects, 1)],
            "conditions": [{**effect(e), "measured": list(facts(e.trial, {
                e.knob.split(".", 1)[0]})) if e.trial else []} for e in conditions],
            "best": [{"stack": best.stack, "workload": best.workload,
                      "concurrency": best.concurrency, "conditions": dict(best.under),
                      "trial_id": best.trial.trial_id,
                      "knobs": best.trial.knobs, "rps": best.trial.rps.median,
                      "recommendation": best.label(name),
                      "default_trial_id": best.default.trial_id if best.default else None,
                      "vs_defaults": _comparison(best.over_default)
                      if best.over_default else None,
                      **(best.decision.doc() if best.decision else
                         {"verdict": None, "reason": None}),
                      "best_single": {"knob": best.best_single.knob,
                                      "value": best.best_single.value,
                                      "vs": _comparison(best.over_best_single)
                                      if best.over_best_single else None}
                      if best.best_single else None} for best in bests]}
