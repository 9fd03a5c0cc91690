"""S1's database method: the model application's SQL looped N times against MariaDB alone,
once per distinct set of `mariadb.*` knob values in an experiment.

The statements are the ones showArticle.php sends (workloads/app.py), byte for byte, so
that the query cache sees the same texts: the two counts every page runs, the latest 50
with authors (`show`), 5 articles by ids chosen in the client (`id`), and the subtree of
the root to depth 2 fetched recursively (`tree`). They go through ONE persistent
connection (PyMySQL over the unix socket, autocommit like mysqli), the kinds interleaved
in every loop, with the same ids in every variant. Each variant is stored as it finishes;
report/measures.py lays them out.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import pymysql

from . import __version__, lab
from .errors import SpecError, StacklabError
from .hostinfo import host_facts
from .systune import CpuAwake
from .net import free_port
from .plan import Plan, effective_knobs
from .spec import ExperimentSpec
from .stack import HOST
from .stacks import COMPONENTS, REGISTRY, STACKS
from .stacks.base import RenderContext
from .stacks.mariadb.client import query, status
from .store import DbBenchRecord, Store
from .workloads import WORKLOADS
from .workloads.appdata import AppDatabase

SCHEMA_VERSION = 1
C = "mariadb"

# The page's statements (showArticle.php's SL_SELECT keeps its line break and indent).
SELECT = ("SELECT a.id, a.title, a.summary, a.published, u.name AS author\n"
          "                   FROM articles a JOIN authors u ON u.id = a.author")
COUNTS = ("SELECT COUNT(*) AS n FROM articles", "SELECT COUNT(*) AS n FROM authors")
SHOW = SELECT + " ORDER BY a.published DESC LIMIT 50"
BY_ID = SELECT.replace("a.published,", "a.published, a.body,") + " WHERE a.id = "
ROOT = "SELECT id FROM articles WHERE parent = 0 LIMIT 1"
NODE = "SELECT id, title, summary, `left`, `right` FROM articles WHERE id = "
KINDS = ("counts", "show", "id", "tree")
IDS_PER_PAGE = 5
TREE_DEPTH = 2


@dataclass(frozen=True)
class Variant:
    """One MariaDB setting to measure: its mariadb.* values and the database it serves."""

    knobs: dict[str, Any]          # every mariadb knob, effective value
    database: AppDatabase
    label: str                     # what differs from the defaults ("defaults" if nothing)


# planning (pure) -----------------------------------------------------------------

def plan_variants(spec: ExperimentSpec, plan: Plan) -> list[Variant]:
    """The distinct mariadb settings of the trials that run MariaDB with a database;
    the all-defaults one first (the ratios' reference), the rest in plan order."""
    defaults = REGISTRY.defaults(C)
    found: dict[str, Variant] = {}
    for trial in plan.trials:
        stack, workload = STACKS[trial.stack], WORKLOADS[trial.workload]
        if C not in stack.components or workload.database is None:
            continue
        knobs = effective_knobs(REGISTRY, stack, trial)[C]
        database = workload.database(spec.experiment.seed)
        key = json.dumps([knobs, database.key], sort_keys=True)
        changed = [f"{k}={v}" for k, v in sorted(knobs.items()) if defaults.get(k) != v]
        found.setdefault(key, Variant(knobs, database, " ".join(changed) or "defaults"))
    if not found:
        stacks = sorted({t.stack for t in plan.trials})
        raise SpecError(spec.path, "matrix.stack", stacks, "no trial runs mariadb with a "
                        "workload that has a database (app-*): dbbench has nothing to measure")
    comp = COMPONENTS[C]
    if not comp.installed():
        raise StacklabError(f"{C} is not installed ({comp.binary} missing): "
                            f"apt-get install {comp.package}")
    return sorted(found.values(), key=lambda v: v.knobs != defaults)


# measuring -----------------------------------------------------------------------

def run_dbbench(spec: ExperimentSpec, variants: list[Variant], loops: int, store: Store,
                now: Callable[[], str],
                on_stored: Callable[[DbBenchRecord], None] = lambda r: None
                ) -> list[DbBenchRecord]:
    """Measure each variant on a MariaDB of its own; each is stored as it finishes."""
    if loops < 1:
        raise StacklabError(f"--loops {loops}: must be at least 1")
    versions = {C: COMPONENTS[C].version(), "pymysql": pymysql.__version__,
                "stacklab": __version__}
    records = []
    with lab.session_scope() as session, CpuAwake() as cpus:
        host = {**host_facts(), **cpus.state()}   # one client connection: CPUs kept awake
        for i, variant in enumerate(variants):
            result = bench_variant(variant, loops, session, f"dbbench-{i}",
                                   spec.experiment.seed)
            record = DbBenchRecord(now(), spec.experiment.name, variant.knobs, loops,
                                   result, versions, host)
            record = replace(record, id=store.add_dbbench(record))
            records.append(record)
            on_stored(record)
    return records


def bench_variant(variant: Variant, loops: int, session: lab.Session, name: str,
                  seed: int) -> dict[str, Any]:
    """Start MariaDB alone (seeded through the component), check it, loop, stop it."""
    comp = COMPONENTS[C]
    run_dir = session.run_dir(name)
    user, group = lab.server_user()
    ctx = RenderContext(run_dir, run_dir, HOST, free_port(HOST), user, group,
                        cache_dir=session.run_dir("cache"), database=variant.database)
    started = comp.start(ctx, variant.knobs, ready_timeout_s=60.0)
    try:
        socket = started.endpoint.unix
        checks = check_variant(socket, variant)
        before = status(socket, ("Qcache_hits", "Questions"))
        db = variant.database
        try:
            conn = pymysql.connect(unix_socket=str(socket), user=db.user, password=db.password,
                                   database=db.name, autocommit=True, charset="utf8mb4")
        except pymysql.MySQLError as e:
            raise StacklabError(f"{C} ({variant.label}): cannot connect as {db.user}: "
                                f"{e}") from e
        try:
            queries = loop_queries(conn, loops, random.Random(seed))
        except pymysql.MySQLError as e:
            raise StacklabError(f"{C} ({variant.label}): a query failed: {e}") from e
        finally:
            conn.close()
        after = status(socket, ("Qcache_hits", "Questions"))
    finally:
        comp.stop(started)
    return {"schema_version": SCHEMA_VERSION, "variant": variant.label, "loops": loops,
            "seed": seed, "database": {"key": db.key, "articles": db.articles,
                                       "authors": db.authors},
            "checks": checks, "queries": queries,
            "qcache_hits": after["Qcache_hits"] - before["Qcache_hits"],
            "questions": after["Questions"] - before["Questions"]}


def check_variant(socket, variant: Variant) -> dict[str, Any]:
    """Verify before measuring: the knobs took effect and the data is all there."""
    k, db = variant.knobs, variant.database
    row = query(socket, "SELECT @@query_cache_type, @@innodb_buffer_pool_size, "
                f"@@key_buffer_size, (SELECT COUNT(*) FROM `{db.name}`.articles), "
                f"(SELECT COUNT(*) FROM `{db.name}`.authors), (SELECT GROUP_CONCAT(DISTINCT "
                f"LOWER(ENGINE)) FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
                f"'{db.name}')")[0]
    got = {"query_cache_type": row[0].lower(), "innodb_buffer_pool_size_mb": int(row[1]) >> 20,
           "key_buffer_size_mb": int(row[2]) >> 20, "articles": int(row[3]),
           "authors": int(row[4]), "engine": row[5]}
    want = {"query_cache_type": k["query_cache_type"],
            "innodb_buffer_pool_size_mb": k["innodb_buffer_pool_size_mb"],
            "key_buffer_size_mb": k["key_buffer_size_mb"], "articles": db.articles,
            "authors": db.authors, "engine": k["engine"]}
    off = [f"{n} = {got[n]} (wanted {w})" for n, w in want.items() if got[n] != w]
    if off:
        raise StacklabError(f"{C} ({variant.label}) failed verification, not measured: "
                            + ", ".join(off))
    return got


def loop_queries(conn, loops: int, rng: random.Random) -> dict[str, dict[str, Any]]:
    """Every kind once per loop, interleaved; per kind the total time and the medians of
    a loop's time (and per statement). Samples stay in memory only: loops × 4 numbers."""
    cur = conn.cursor()

    def run(sql: str) -> list[tuple]:
        cur.execute(sql)
        return cur.fetchall()

    articles = run(COUNTS[0])[0][0]
    ns: dict[str, list[int]] = {kind: [] for kind in KINDS}
    statements: dict[str, int] = {kind: 0 for kind in KINDS}
    rows: dict[str, int] = {kind: 0 for kind in KINDS}
    for _ in range(loops):
        ids = [rng.randint(1, articles) for _ in range(IDS_PER_PAGE)] if articles else []
        for kind in KINDS:
            t0 = time.perf_counter_ns()
            n_stmt, n_rows = _page_queries(kind, run, ids)
            ns[kind].append(time.perf_counter_ns() - t0)
            statements[kind] += n_stmt
            rows[kind] += n_rows
    out = {}
    for kind in KINDS:
        per_loop = statements[kind] / loops
        loop_us = statistics.median(ns[kind]) / 1000
        out[kind] = {"statements_per_loop": per_loop, "rows_per_loop": rows[kind] / loops,
                     "total_s": sum(ns[kind]) / 1e9, "per_loop_us_median": loop_us,
                     "per_query_us_median": loop_us / per_loop if per_loop else None}
    return out


def _page_queries(kind: str, run: Callable[[str], list[tuple]],
                  ids: list[int]) -> tuple[int, int]:
    """One page's statements of this kind; (statements, rows) sent and read."""
    if kind == "counts":
        return len(COUNTS), sum(len(run(sql)) for sql in COUNTS)
    if kind == "show":
        return 1, len(run(SHOW))
    if kind == "id":
        return len(ids), sum(len(run(BY_ID + str(i))) for i in ids)
    root = run(ROOT)
    counted = [1, len(root)]

    def node(i: int, depth: int) -> None:      # showArticle.php's sl_tree()
        found = run(NODE + str(i))
        counted[0] += 1
        counted[1] += len(found)
        if found and depth < TREE_DEPTH:
            for child in found[0][3:5]:
                if child:
                    node(int(child), depth + 1)
    if root:
        node(int(root[0][0]), 0)
    return counted[0], counted[1]
