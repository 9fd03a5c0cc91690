"""Text output (Rich) of S1's two methods: a breakdown (where one request's time goes)
and dbbench (the model application's SQL per MariaDB setting). The data is their
versioned JSON (breakdown.py, dbbench.py) as stored, or a series' summary over its
repetitions (their series_summary); this only lays it out, each figure written by
fmt.py. Their progress is run's bar (progress.py)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..store import DbBenchRecord
from . import fmt
from .progress import RichProgress


def summary_line(measurement: dict[str, Any]) -> str:
    """S1's way: 'database 0.86 ms (27%), php 0.68 ms (21%), …', the network's share
    with the link's RTT beside it."""
    parts = []
    for row in measurement["shares"]:
        if row["ms"] is None:
            parts.append(f"{row['component']} {fmt.DASH} (loopback only)")
        else:
            rtt = (f"; RTT {fmt.milliseconds(row['rtt_ms'])} ms" if row.get("rtt_ms")
                   is not None else "")
            parts.append(f"{row['component']} {fmt.milliseconds(row['ms'], 2)} ms "
                         f"({fmt.percent(row['percent'])}{rtt})")
    return ", ".join(parts)


def breakdown_lines(result: dict[str, Any]) -> list[str]:
    """One summary line per URL and keep-alive mode."""
    return [f"{url['path']} keep-alive {'on' if m['keepalive'] else 'off'}: {summary_line(m)}"
            for url in result["urls"] for m in url["measurements"]]


def breakdown_tables(result: dict[str, Any], title: str) -> list[Table]:
    """One table per URL: component × (keep-alive off, keep-alive on); over veth (schema
    2) the network's row with the link's RTT, and both totals."""
    ms, pct = fmt.milliseconds, fmt.percent
    link = result.get("network") or {"mode": "loopback"}     # schema 1: loopback only
    tables = []
    for url in result["urls"]:
        off, on = url["measurements"]
        table = Table(title=f"{title}  {url['path']}")
        table.add_column("component")
        for label in ("keep-alive off", "keep-alive on"):
            table.add_column(f"{label} ms", justify="right")
            table.add_column("%", justify="right")
        for a, b in zip(off["shares"], on["shares"]):
            table.add_row(_component(a), ms(a["ms"]), pct(a["percent"]), ms(b["ms"]),
                          pct(b["percent"]))
        table.add_section()
        for row in _totals(off, on):
            table.add_row(*row)
        notes = [f"{off['completed']} + {on['completed']} requests on one connection"]
        if off["failed"] or on["failed"]:
            notes.append(f"failed: {off['failed']} + {on['failed']}")
        notes += sorted({f for m in (off, on) for f in m["flags"]})
        notes.append(f"network: {result['network_note']}")
        if link["mode"] == "veth":
            notes.append(f"veth link {link['link']}: RTT {ms(link['rtt_ms'])} ms, "
                         f"{fmt.number(link['rate_bytes_s'] / 1e6, 1)} MB/s, measured as "
                         "it was made")
        table.caption = "; ".join(notes)
        tables.append(table)
    return tables


def _component(row: dict[str, Any]) -> str:
    """The row's component, the network's with the link's round-trip time beside it."""
    if row.get("rtt_ms") is None:
        return row["component"]
    return f"{row['component']} (RTT {fmt.milliseconds(row['rtt_ms'])} ms)"


def _totals(off: dict[str, Any], on: dict[str, Any]) -> list[tuple[str, ...]]:
    """The rows under the shares: the total they add up to, time to first byte and
    connect; over veth, those across the link and the loopback total beside them."""
    ms = fmt.milliseconds
    if not off.get("veth"):
        return [("total (median)", ms(off["total_ms"]), "100%", ms(on["total_ms"]), "100%"),
                ("time to first byte", ms(off["ttfb_ms"]), "", ms(on["ttfb_ms"]), ""),
                ("connect", ms(off["connect_ms"]), "", fmt.DASH, "")]
    a, b = off["veth"], on["veth"]
    return [("total over veth (median)", ms(a["total_ms"]), "100%", ms(b["total_ms"]),
             "100%"),
            ("total on loopback (median)", ms(off["total_ms"]), "", ms(on["total_ms"]), ""),
            ("time to first byte over veth", ms(a["ttfb_ms"]), "", ms(b["ttfb_ms"]), ""),
            ("connect over veth", ms(a["connect_ms"]), "", fmt.DASH, ""),
            ("connect on loopback", ms(off["connect_ms"]), "", fmt.DASH, "")]


def dbbench_table(records: list[DbBenchRecord], title: str) -> Table:
    """Variant × query kind, with each figure's ratio to the first variant's."""
    table = Table(title=title)
    for col, justify in (("variant", "left"), ("query", "left"), ("stmts/loop", "right"),
                         ("total s", "right"), ("µs/query (median)", "right"),
                         ("vs first", "right")):
        table.add_column(col, justify=justify)
    first = records[0].result["queries"] if records else {}
    for r in records:
        table.add_section()
        for i, (kind, q) in enumerate(r.result["queries"].items()):
            base = first[kind]["per_query_us_median"]
            mine = q["per_query_us_median"]
            table.add_row(r.result["variant"] if i == 0 else "", kind,
                          fmt.count(q["statements_per_loop"]), fmt.number(q["total_s"], 3),
                          fmt.number(mine, 1),
                          fmt.times(mine / base if mine is not None and base else None))
    if records:
        table.caption = (f"{records[0].loops} loops per variant on one connection; "
                         f"query cache hits: " + ", ".join(
                             f"{r.result['variant']} {r.result['qcache_hits']}"
                             for r in records))
    return table


# progress ------------------------------------------------------------------------

class StepProgress:
    """A breakdown's or dbbench's steps on run's bar (progress.RichProgress: what runs,
    i/N, elapsed, ETA): `step(what)` closes the previous step and names the next."""

    def __init__(self, out: Console, total: int):
        self.rich, self.total, self.started = RichProgress(out), total, 0

    def __enter__(self) -> "StepProgress":
        self.rich.begin(self.total, 0)
        return self

    def step(self, what: str) -> None:
        if self.started:
            self.rich.bar.advance(self.rich.task)
        self.started += 1
        self.rich.bar.update(self.rich.task, description=what)

    def note(self, text: str) -> None:
        self.rich.out.print(text, markup=False, highlight=False, soft_wrap=True)

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is None and self.started:
            self.rich.bar.advance(self.rich.task)
        self.rich.end()


# a series over its repetitions ---------------------------------------------------

def _estimate(e: dict[str, Any] | None, write=fmt.milliseconds) -> tuple[str, str]:
    """(median, interval) of an estimate_doc: a range below 6 values is called so."""
    if e is None:
        return fmt.DASH, ""
    if not e["ci"]:
        return write(e["median"]), fmt.DASH
    lo, hi = e["ci"]
    return write(e["median"]), ("range " if e["is_range"] else "") + (
        f"{write(lo)}–{write(hi)}")


def _interval_name(estimates: list[dict[str, Any] | None]) -> str:
    """The interval column's name: "95% CI", "range" (fewer than 6 repetitions) or both."""
    ranges = [e["is_range"] for e in estimates if e and e["ci"]]
    return "range" if ranges and all(ranges) else ("95% CI / range" if any(ranges)
                                                   else "95% CI")


def breakdown_series_tables(summary: dict[str, Any]) -> list[Table]:
    """One table per URL: component × keep-alive (median ms over the repetitions, its
    interval, median share)."""
    title = (f"breakdown {summary['series']}: {summary['stack']} {summary['workload']}"
             + "".join(f" {k}={v}" for k, v in sorted(summary["knobs"].items()))
             + (f" over veth ({summary['link']})" if summary["network"] == "veth" else ""))
    tables = []
    for url in summary["urls"]:
        off, on = url["measurements"]
        name = _interval_name([row["ms"] for m in (off, on) for row in m["shares"]]
                              + [off["total_ms"], on["total_ms"]])
        table = Table(title=f"{title}  {url['path']}")
        table.add_column("component")
        for label in ("keep-alive off", "keep-alive on"):
            table.add_column(f"{label} ms", justify="right")
            table.add_column(name, justify="right")
            table.add_column("%", justify="right")
        for a, b in zip(off["shares"], on["shares"]):
            table.add_row(_series_component(a), *_estimate(a["ms"]), _percent(a["percent"]),
                          *_estimate(b["ms"]), _percent(b["percent"]))
        table.add_section()
        total = "veth_total_ms" if off["veth_total_ms"] else "total_ms"
        table.add_row("total over veth" if total == "veth_total_ms" else "total",
                      *_estimate(off[total]), "100%", *_estimate(on[total]), "100%")
        table.add_row("time to first byte", *_estimate(off["ttfb_ms"]), "",
                      *_estimate(on["ttfb_ms"]), "")
        notes = [f"medians of {summary['repetitions']} repetition(s), each a fresh stack "
                 f"(ids {', '.join(map(str, summary['ids']))}); {summary['requests']} "
                 "requests per mode in each"]
        if summary["repetitions"] < summary["planned_repetitions"]:
            notes.append(f"{summary['planned_repetitions']} planned")
        notes += sorted({f for m in (off, on) for f in m["flags"]})
        table.caption = "; ".join(notes)
        tables.append(table)
    return tables


def _series_component(row: dict[str, Any]) -> str:
    """The row's component, the network's with the link's median round-trip time."""
    rtt = row.get("rtt_ms")
    return row["component"] + (f" (RTT {fmt.milliseconds(rtt['median'])} ms)" if rtt else "")


def _percent(e: dict[str, Any] | None) -> str:
    return fmt.percent(e["median"] if e else None)


def breakdown_series_lines(summary: dict[str, Any]) -> list[str]:
    """S1's summary line per URL and keep-alive mode, from the medians."""
    lines = []
    for url in summary["urls"]:
        for m in url["measurements"]:
            parts = [f"{row['component']} " + (
                f"{fmt.milliseconds(row['ms']['median'], 2)} ms "
                f"({fmt.percent(row['percent']['median'])}" + (
                    f"; RTT {fmt.milliseconds(row['rtt_ms']['median'])} ms)"
                    if row.get("rtt_ms") else ")") if row["ms"] else
                f"{fmt.DASH} (loopback only)") for row in m["shares"]]
            lines.append(f"{url['path']} keep-alive {'on' if m['keepalive'] else 'off'}: "
                         + ", ".join(parts))
    return lines


def breakdown_list_table(entries: list[dict[str, Any]], db) -> Table:
    """`breakdown --list`: one line per stored series."""
    table = Table(title=f"breakdowns in {db}")
    for col in ("id", "created", "stack", "workload", "knobs", "network", "reps", "ids"):
        table.add_column(col, justify="right" if col in ("id", "reps") else "left")
    for e in entries:
        reps = str(e["repetitions"]) + ("" if e["repetitions"] >= e["planned_repetitions"]
                                        else f" of {e['planned_repetitions']}")
        table.add_row(str(e["series"]), e["created_at"][:19].replace("T", " "), e["stack"],
                      e["workload"], " ".join(f"{k}={v}" for k, v in
                                              sorted(e["knobs"].items())),
                      e["network"], reps, _ids(e["ids"]))
    return table


def _ids(ids: list[int]) -> str:
    return f"{ids[0]}–{ids[-1]}" if len(ids) > 2 and ids[-1] - ids[0] == len(ids) - 1 \
        else ", ".join(map(str, ids))


def dbbench_series_table(summary: dict[str, Any]) -> Table:
    """Variant × query kind: median µs per query over the repetitions with its interval,
    and the ratio to the reference variant with its 95% CI and verdict (as `compare`)."""
    per = [q["per_query_us"] for v in summary["variants"] for q in v["queries"].values()]
    table = Table(title=f"dbbench {summary['series']}: {summary['experiment']}")
    for col, justify in (("variant", "left"), ("query", "left"), ("stmts/loop", "right"),
                         ("µs/query (median)", "right"), (_interval_name(per), "right"),
                         (f"vs {summary['reference']}", "right"), ("95% CI", "right"),
                         ("verdict", "left")):
        table.add_column(col, justify=justify)
    number = lambda v: fmt.number(v, 1)   # noqa: E731
    for v in summary["variants"]:
        table.add_section()
        for i, (kind, q) in enumerate(v["queries"].items()):
            c = q["vs_reference"]
            table.add_row(f"{v['variant']} ×{v['repetitions']}" if i == 0 else "", kind,
                          fmt.count(q["statements_per_loop"]),
                          *_estimate(q["per_query_us"], number),
                          fmt.times(c["ratio"]) if c else fmt.DASH,
                          fmt.ratio_ci(c["ci"]) if c else "", c["text"] if c else "")
    table.caption = (f"{'/'.join(map(str, summary['loops']))} loops per repetition on one "
                     "connection, each repetition a fresh database; ratio: geometric means, "
                     "Welch's t-test on logs; query cache hits: " + ", ".join(
                         f"{v['variant']} {'/'.join(map(str, v['qcache_hits']))}"
                         for v in summary["variants"]))
    return table


def dbbench_list_table(entries: list[dict[str, Any]], db) -> Table:
    """`dbbench --list`: one line per stored series."""
    table = Table(title=f"dbbenches in {db}")
    for col in ("id", "created", "experiment", "variants", "loops", "reps", "ids"):
        table.add_column(col, justify="right" if col in ("id", "reps") else "left")
    for e in entries:
        table.add_row(str(e["series"]), e["created_at"][:19].replace("T", " "),
                      e["experiment"], ", ".join(e["variants"]),
                      "/".join(map(str, e["loops"])), str(e["repetitions"]), _ids(e["ids"]))
    return table
