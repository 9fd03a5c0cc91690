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
