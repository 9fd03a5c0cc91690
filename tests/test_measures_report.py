"""Golden tests of S1's two methods as the terminal shows them (report/measures.py): a
breakdown's tables and summary lines, and dbbench's table, from fixed results."""

import io

from rich.console import Console

from stacklab.report.measures import breakdown_lines, breakdown_tables, dbbench_table
from stacklab.store import DbBenchRecord

from helpers import assert_golden

NOTE = "loopback only: no network share is measured"


def shares(total, db, php):
    rows = [{"component": "database", "ms": db, "percent": 100 * db / total},
            {"component": "php", "ms": php, "percent": 100 * php / total},
            {"component": "web server (nginx)", "ms": total - db - php,
             "percent": 100 * (total - db - php) / total}]
    return rows + [{"component": "network", "ms": None, "percent": None, "note": NOTE}]


def measurement(keepalive, total, db, php, failed=0, flags=()):
    return {"keepalive": keepalive, "completed": 60, "failed": failed, "total_ms": total,
            "ttfb_ms": total - 0.01, "connect_ms": None if keepalive else 0.042,
            "server_timing": {"samples": 50, "db_ms": db, "php_ms": php},
            "shares": shares(total, db, php), "flags": list(flags)}


BREAKDOWN = {"schema_version": 1, "stack": "nginx+php-fpm+mariadb", "workload": "app-show",
             "front": "nginx", "requests": 60, "timing_samples": 50, "network_ms": None,
             "network_note": NOTE,
             "urls": [{"path": "/showArticle.php?show=1", "measurements": [
                 measurement(False, 3.2104, 0.8612, 0.6803, failed=1),
                 measurement(True, 2.5, 0.9, 1.7, flags=["script-longer-than-request"])]}]}


def queries(scale):
    return {kind: {"statements_per_loop": n, "rows_per_loop": rows, "total_s": t * scale,
                   "per_loop_us_median": us * scale * n, "per_query_us_median": us * scale}
            for kind, n, rows, t, us in (("counts", 2, 2, 0.0123, 40.25),
                                         ("show", 1, 50, 0.2, 1234.5),
                                         ("id", 5, 5, 0.05, 61.0),
                                         ("tree", 7.5, 7.5, 0.04, 33.3))}


def dbbench_records():
    return [DbBenchRecord("2026-01-02T03:04:05.000+00:00", "qc", {"query_cache_type": qc},
                          50, {"variant": label, "queries": queries(scale),
                               "qcache_hits": hits}, {}, {}, id=i)
            for i, (qc, label, scale, hits) in enumerate(
                (("off", "defaults", 1.0, 0), ("on", "query_cache_type=on", 0.5, 212)), 1)]


def rendered(*items) -> str:
    out = Console(file=io.StringIO(), width=120, color_system=None)
    for item in items:
        out.print(item, highlight=False, soft_wrap=isinstance(item, str))
    return out.file.getvalue()


def test_a_breakdown_as_the_terminal_shows_it():
    text = rendered(*breakdown_tables(BREAKDOWN, "breakdown 1: nginx+php-fpm+mariadb "
                                                 "app-show"), *breakdown_lines(BREAKDOWN))
    assert_golden("breakdown.txt", text)


def test_dbbench_as_the_terminal_shows_it():
    assert_golden("dbbench.txt", rendered(dbbench_table(dbbench_records(), "dbbench: qc")))
