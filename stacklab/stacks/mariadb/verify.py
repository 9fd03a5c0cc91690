"""Checks that the model application really runs on this database: the data is there,
each page issues the queries it should and reads rows, and the knobs took effect."""

from __future__ import annotations

from ...errors import StackError
from ...verify import Status, Verdict, fetch
from ...workloads.appdata import AppDatabase, subtree, root
from ..base import Started
from .client import query, status

C = "mariadb"
COUNTERS = ("Questions", "Rows_read", "Qcache_hits")


def expected_queries(db: AppDatabase) -> dict[str, int]:
    """Statements per page: the connection's own (its COM_QUIT counts in Questions), two
    counts on every page, then the page's own."""
    tree = len(subtree(db, root(db))) if db.articles else 0
    return {"/showArticle.php?show=1": 1 + 2 + 1,
            "/showArticle.php?id=1": 1 + 2 + (5 if db.articles else 0),
            "/showArticle.php?tree=1": 1 + 2 + 1 + tree}


def verify_mariadb(started: Started, front: Started) -> list[Verdict]:
    db = started.ctx.database
    socket = started.endpoint.unix
    try:
        verdicts = [_settings(socket, started.knobs)]
        if not isinstance(db, AppDatabase):
            return verdicts
        verdicts += [_data(socket, db, started.knobs["engine"])]
        verdicts += _pages(socket, db, front)
        verdicts += [_query_cache(socket, started.knobs, front)]
    except (StackError, OSError, ValueError) as e:
        verdicts.append(Verdict(C, "database", Status.FAIL, str(e)))
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
        return Verdict(C, "settings", Status.FAIL, "not applied: " + ", ".join(
            f"{n} = {g} (wanted {w})" for n, (g, w) in off.items()))
    pool, keys = got["innodb_buffer_pool_size"] >> 20, got["key_buffer_size"] >> 20
    return Verdict(C, "settings", Status.PASS,
                   f"buffer pool {pool} MB, key buffer {keys} MB, as configured")


def _data(socket, db: AppDatabase, engine: str) -> Verdict:
    rows = query(socket, f"SELECT TABLE_NAME, ENGINE, (SELECT COUNT(*) FROM `{db.name}`.articles),"
                 f" (SELECT COUNT(*) FROM `{db.name}`.authors) FROM information_schema.TABLES "
                 f"WHERE TABLE_SCHEMA = '{db.name}'")
    engines = {r[1].lower() for r in rows}
    articles, authors = (int(rows[0][2]), int(rows[0][3])) if rows else (0, 0)
    if engines != {engine}:
        return Verdict(C, "data", Status.FAIL, f"tables use {sorted(engines)}, not {engine}")
    if (articles, authors) != (db.articles, db.authors) or not articles:
        return Verdict(C, "data", Status.FAIL, f"holds {articles} articles and {authors} "
                       f"authors; the workload needs {db.articles} and {db.authors}")
    return Verdict(C, "data", Status.PASS, f"{articles} articles, {authors} authors, {engine}")


def _pages(socket, db: AppDatabase, front: Started) -> list[Verdict]:
    """One request of each page between two status readings."""
    base = status(socket, COUNTERS)
    idle = status(socket, COUNTERS)["Questions"] - base["Questions"]   # our own SHOW
    verdicts = []
    for path, queries in expected_queries(db).items():
        before = status(socket, COUNTERS)
        resp = fetch(front.endpoint, path)
        after = status(socket, COUNTERS)
        delta = {n: after[n] - before[n] for n in COUNTERS}
        asked = delta["Questions"] - idle
        read = delta["Rows_read"]     # MariaDB's rows read by any engine
        check = f"queries {path}"
        if resp.status != 200:
            verdicts.append(Verdict(C, check, Status.FAIL, f"status {resp.status}"))
        elif asked != queries:
            verdicts.append(Verdict(C, check, Status.FAIL, f"{asked} statements reached the "
                                    f"database, expected {queries}"))
        elif read <= 0 and not delta["Qcache_hits"]:
            verdicts.append(Verdict(C, check, Status.FAIL, f"{asked} statements read no rows "
                                    "(an empty database?)"))
        else:
            verdicts.append(Verdict(C, check, Status.PASS, f"{asked} statements, {read} rows "
                                    f"read, {delta['Qcache_hits']} query cache hits"))
    return verdicts


def _query_cache(socket, k, front: Started) -> Verdict:
    on = k["query_cache_type"] == "on" and k["query_cache_size_mb"] > 0
    path = "/showArticle.php?show=1"
    fetch(front.endpoint, path)
    before = status(socket, ("Qcache_hits",))["Qcache_hits"]
    fetch(front.endpoint, path)
    hits = status(socket, ("Qcache_hits",))["Qcache_hits"] - before
    if on != (hits > 0):
        return Verdict(C, "query cache", Status.FAIL, f"query cache is {'on' if on else 'off'} "
                       f"but a repeated page got {hits} hits")
    return Verdict(C, "query cache", Status.PASS, f"{hits} hits on a repeated page"
                   if on else "no hits (off)")
