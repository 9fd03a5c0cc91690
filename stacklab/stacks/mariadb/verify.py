"""Checks that the workload's application really runs on this database (the data is
there, each page issues the queries it should and reads rows: database:mysql's verifier),
and that MariaDB's knobs took effect (the component's own)."""

from __future__ import annotations

from ...errors import StackError
from ...measure.verify import Status, Verdict, fetch
from ..base import Database, RunningComponent
from .client import query, status

MARIADB = "mariadb"
COUNTERS = ("Questions", "Rows_read", "Qcache_hits")


def verify_mariadb(started: RunningComponent, front: RunningComponent) -> list[Verdict]:
    """MariaDB's settings took effect (the component's own check)."""
    try:
        return [_settings(started.endpoint.unix, started.knobs)]
    except (StackError, OSError, ValueError) as e:
        return [Verdict(MARIADB, "database", Status.FAIL, str(e))]


def verify_database(started: RunningComponent, front: RunningComponent) -> list[Verdict]:
    """database:mysql: the workload's data is all there, each page through the front
    sends the statements it should and reads rows, and the query cache hits exactly when
    the knobs turn it on (none without a workload's database)."""
    socket, db = started.endpoint.unix, started.ctx.database
    if db is None:
        return []
    verdicts = []
    try:
        verdicts.append(_data(socket, db, started.knobs["engine"]))
        verdicts += _pages(socket, db, front)
        verdicts.append(_query_cache(socket, started.knobs, db, front))
    except (StackError, OSError, ValueError) as e:
        verdicts.append(Verdict(MARIADB, "database", Status.FAIL, str(e)))
    return verdicts


def _settings(socket, k) -> Verdict:
    want = {"innodb_buffer_pool_size": k["innodb_buffer_pool_size_mb"] << 20,
            "key_buffer_size": k["key_buffer_size_mb"] << 20,
            "max_connections": k["max_connections"],
            "table_open_cache": k["table_open_cache"]}
    got = dict(zip(want, map(int, query(socket, "SELECT " + ", ".join(
        f"@@{name}" for name in want))[0])))
    off = {n: (got[n], v) for n, v in want.items() if got[n] != v}
    if off:
        return Verdict(MARIADB, "settings", Status.FAIL, "not applied: " + ", ".join(
            f"{n} = {g} (wanted {w})" for n, (g, w) in off.items()))
    pool, keys = got["innodb_buffer_pool_size"] >> 20, got["key_buffer_size"] >> 20
    return Verdict(MARIADB, "settings", Status.PASS,
                   f"buffer pool {pool} MB, key buffer {keys} MB, as configured")


def _data(socket, db: Database, engine: str) -> Verdict:
    want = db.tables
    counts = ", ".join(f"(SELECT COUNT(*) FROM `{db.name}`.{table})" for table in want)
    rows = query(socket, f"SELECT TABLE_NAME, ENGINE, {counts} FROM information_schema.TABLES "
                 f"WHERE TABLE_SCHEMA = '{db.name}'")
    engines = {r[1].lower() for r in rows}
    got = dict(zip(want, (int(n) for n in rows[0][2:]))) if rows else dict.fromkeys(want, 0)
    if engines != {engine}:
        return Verdict(MARIADB, "data", Status.FAIL, f"tables use {sorted(engines)}, not {engine}")
    short = (got != want if db.exact else any(got[t] < n for t, n in want.items()))
    if short or not all(got.values()):
        return Verdict(MARIADB, "data", Status.FAIL, "holds " + " and ".join(
            f"{n} {table}" for table, n in got.items()) + "; the workload needs "
            + ("" if db.exact else "at least ") + " and ".join(map(str, want.values())))
    return Verdict(MARIADB, "data", Status.PASS,
                   ", ".join(f"{n} {table}" for table, n in got.items()) + f", {engine}")


def _pages(socket, db: Database, front: RunningComponent) -> list[Verdict]:
    """One request of each page between two status readings."""
    base = status(socket, COUNTERS)
    idle = status(socket, COUNTERS)["Questions"] - base["Questions"]   # our own SHOW
    verdicts = []
    for path, queries in db.page_queries().items():
        before = status(socket, COUNTERS)
        resp = fetch(front.endpoint, path)
        after = status(socket, COUNTERS)
        delta = {n: after[n] - before[n] for n in COUNTERS}
        asked = delta["Questions"] - idle
        read = delta["Rows_read"]     # MariaDB's rows read by any engine
        check = f"queries {path}"
        if resp.status != 200:
            verdicts.append(Verdict(MARIADB, check, Status.FAIL, f"status {resp.status}"))
        elif asked != queries and (queries is not None or asked < 1):
            verdicts.append(Verdict(MARIADB, check, Status.FAIL, f"{asked} statements reached the "
                                    f"database, expected {queries or 'some'}"))
        elif read <= 0 and not delta["Qcache_hits"]:
            verdicts.append(Verdict(MARIADB, check, Status.FAIL,
                                    f"{asked} statements read no rows (an empty database?)"))
        else:
            verdicts.append(Verdict(MARIADB, check, Status.PASS,
                                    f"{asked} statements, {read} rows read, "
                                    f"{delta['Qcache_hits']} query cache hits"))
    return verdicts


def _query_cache(socket, k, db: Database, front: RunningComponent) -> Verdict:
    on = k["query_cache_type"] == "on" and k["query_cache_size_mb"] > 0
    path = db.cacheable_page
    if path is None:     # a real application: no page is known to repeat its statements
        return Verdict(MARIADB, "query cache", Status.PASS if not on else Status.WARN,
                       "off" if not on else "on, but no page of this application is known "
                       "to send the same statements twice: its hits are not checked")
    fetch(front.endpoint, path)
    before = status(socket, ("Qcache_hits",))["Qcache_hits"]
    fetch(front.endpoint, path)
    hits = status(socket, ("Qcache_hits",))["Qcache_hits"] - before
    if on != (hits > 0):
        return Verdict(MARIADB, "query cache", Status.FAIL,
                       f"query cache is {'on' if on else 'off'} but a repeated page got "
                       f"{hits} hits")
    return Verdict(MARIADB, "query cache", Status.PASS, f"{hits} hits on a repeated page"
                   if on else "no hits (off)")
