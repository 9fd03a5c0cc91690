"""Text output (Rich) of S1's two methods: a breakdown (where one request's time goes)
and dbbench (the model application's SQL per MariaDB setting). The data is their
versioned JSON (breakdown.py, dbbench.py) as stored; this only lays it out, each figure
written by fmt.py."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ..store import DbBenchRecord
from . import fmt


def summary_line(measurement: dict[str, Any]) -> str:
    """S1's way: 'database 0.86 ms (27%), php 0.68 ms (21%), …'."""
    parts = []
    for row in measurement["shares"]:
        if row["ms"] is None:
            parts.append(f"{row['component']} {fmt.DASH} (loopback only)")
        else:
            parts.append(f"{row['component']} {fmt.milliseconds(row['ms'], 2)} ms "
                         f"({fmt.percent(row['percent'])})")
    return ", ".join(parts)


def breakdown_lines(result: dict[str, Any]) -> list[str]:
    """One summary line per URL and keep-alive mode."""
    return [f"{url['path']} keep-alive {'on' if m['keepalive'] else 'off'}: {summary_line(m)}"
            for url in result["urls"] for m in url["measurements"]]


def breakdown_tables(result: dict[str, Any], title: str) -> list[Table]:
    """One table per URL: component × (keep-alive off, keep-alive on)."""
    ms, pct = fmt.milliseconds, fmt.percent
    tables = []
    for url in result["urls"]:
        off, on = url["measurements"]
        table = Table(title=f"{title}  {url['path']}")
        table.add_column("component")
        for label in ("keep-alive off", "keep-alive on"):
            table.add_column(f"{label} ms", justify="right")
            table.add_column("%", justify="right")
        for a, b in zip(off["shares"], on["shares"]):
            table.add_row(a["component"], ms(a["ms"]), pct(a["percent"]), ms(b["ms"]),
                          pct(b["percent"]))
        table.add_section()
        table.add_row("total (median)", ms(off["total_ms"]), "100%", ms(on["total_ms"]),
                      "100%")
        table.add_row("time to first byte", ms(off["ttfb_ms"]), "", ms(on["ttfb_ms"]), "")
        table.add_row("connect", ms(off["connect_ms"]), "", fmt.DASH, "")
        notes = [f"{off['completed']} + {on['completed']} requests on one connection"]
        if off["failed"] or on["failed"]:
            notes.append(f"failed: {off['failed']} + {on['failed']}")
        notes += sorted({f for m in (off, on) for f in m["flags"]})
        table.caption = "; ".join(notes + [f"network: {result['network_note']}"])
        tables.append(table)
    return tables


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
