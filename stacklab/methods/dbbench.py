"""S1's database method: the model application's SQL looped N times against the stack's
MySQL database alone (the component that provides database:mysql), once per distinct set
of its knob values in an experiment.

The statements are the ones showArticle.php sends, read from the page itself
(workloads/app.py), byte for byte, so that the query cache sees the same texts: the two
counts every page runs, the latest 50 with authors (`show`), 5 articles by ids chosen in
the client (`id`), and the subtree of the root to depth 2 fetched recursively (`tree`).
They go through ONE persistent connection (the component's own client, base.SqlClient,
holding it as the application does), the kinds interleaved in every loop, with the same
ids in every variant. Each variant is measured inside one layer, the stack's
(stack.StackLayer in a layers.Composition, as a run and a breakdown are: the database
alone, started through its lifecycle, verified, always stopped; a FAIL stops it before
the loops) and stored as it finishes; report/measures.py lays them out.

Repetitions: each variant is measured `repetitions` times, round by round (every variant
once, then again: drift of a busy machine spreads over all of them), each time on a
database of its own. `series_summary` gives each variant's median µs per query over
them with an interval (analyze.Estimate) and its ratio to the reference variant (the
defaults when measured) with stats.compare's CI and verdict, as `compare` does.

Result schema changes:
  1  one variant measured once.
  2  `repetition` (1-based), `repetitions` (planned) and `series` (the stored id of the
     series' first record; None in that first one, whose own id names the series).
     Records of schema 1 of one experiment read as one series, each a repetition.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from .. import __version__
from ..host import lab
from .breakdown import estimate_doc
from ..env import Environment
from ..errors import SpecError, StackError, StacklabError
from ..host.hostinfo import host_facts
from ..run.layers import Composition
from ..experiment.plan import Plan, effective_knobs
from ..run.validate import check_installed
from ..experiment.spec import ExperimentSpec
from ..analysis.analyze import decide
from ..analysis.stats import compare
from ..run.stack import RunningStack, StackLayer
from ..stacks import COMPONENTS, REGISTRY, STACKS, StackDef
from ..stacks.base import RunningComponent, SqlClient
from ..store import DbBenchRecord, Store
from ..host.systune import CpuAwake
from ..netlab.sweep import SWEEPS
from ..measure.verify import Status, Verdict
from ..workloads import WORKLOADS, Deployed, app
from ..workloads.appdata import AppDatabase

SCHEMA_VERSION = 2
SUMMARY_VERSION = 2     # series_summary's document (schemas/dbbench.schema.json)
DATABASE = "database:mysql"     # what the measured component provides (the app's SQL is MySQL)
READY_TIMEOUT_S = 60.0
PAGE = app.SHOW.decode()          # showArticle.php: its statements are read from it


def _from_page(pattern: str, what: str) -> tuple[str, ...]:
    """The PHP string literals `pattern` captures in showArticle.php (the page sends them
    as written: no escapes). A page rewritten so that one is missing fails at import."""
    found = re.search(pattern, PAGE)
    if found is None:
        raise LookupError(f"showArticle.php no longer holds {what}: dbbench sends the "
                          "page's own statements")
    return found.groups()


# The page's statements (SL_SELECT keeps its line break and indent).
(SELECT,) = _from_page(r"const SL_SELECT = '([^']*)';", "SL_SELECT")
COUNTS = _from_page(r"\$articles = [^;]*sl_query\('([^']*)'\)[^;]*;\s*"
                    r"\$authors = [^;]*sl_query\('([^']*)'\)", "the two counts")
SHOW = SELECT + _from_page(r"sl_query\(SL_SELECT \. '([^']*)'\)", "the show query")[0]
_BODY, _WITH_BODY, _WHERE_ID = _from_page(
    r"str_replace\('([^']*)', '([^']*)', SL_SELECT\)\s*\. '([^']*)'", "the id query")
BY_ID = SELECT.replace(_BODY, _WITH_BODY) + _WHERE_ID
(ROOT,) = _from_page(r"\$root = [^;]*?sl_query\('([^']*)'\)", "the tree's root query")
(NODE,) = _from_page(r"function sl_tree[^{]*\{\s*\$rows = sl_query\('([^']*)' \. \$id\)",
                     "the tree's node query")
KINDS = ("counts", "show", "id", "tree")
IDS_PER_PAGE = 5
TREE_DEPTH = 2


@dataclass(frozen=True)
class Variant:
    """One setting of the database component to measure: its knob values and the
    database it serves."""

    knobs: dict[str, Any]          # every knob of the database component, effective value
    database: AppDatabase
    label: str                     # what differs from the defaults ("defaults" if nothing)
    component: str                 # the component that provides database:mysql


@dataclass(frozen=True)
class DbBenchPlan:
    """A validated dbbench: nothing has started yet."""

    experiment: str
    seed: int
    variants: tuple[Variant, ...]
    loops: int
    repetitions: int = 1

    def steps(self) -> list[tuple[int, Variant]]:
        """(repetition, variant) in the order measured: round by round."""
        return [(i, v) for i in range(1, self.repetitions + 1) for v in self.variants]


# planning ------------------------------------------------------------------------

def database_component(stack: StackDef) -> str | None:
    """The component of `stack` that provides database:mysql, if any."""
    return next((c for c in stack.components
                 if any(cap.name == DATABASE for cap in
                        COMPONENTS[c].capabilities(stack.component_knobs(c)))), None)


def plan_dbbench(spec: ExperimentSpec, plan: Plan, loops: int,
                 repetitions: int = 1) -> DbBenchPlan:
    """What to measure, checked before anything starts: the spec's plan has been
    validated (commands.run.load); here its variants, that their database component is
    installed, and the loops."""
    variants = plan_variants(spec, plan)
    check_installed(dict.fromkeys(v.component for v in variants), engine=False)
    if loops < 1:
        raise StacklabError(f"--loops {loops}: must be at least 1")
    if repetitions < 1:
        raise StacklabError(f"--repetitions {repetitions}: must be at least 1")
    return DbBenchPlan(spec.experiment.name, spec.experiment.seed, tuple(variants), loops,
                       repetitions)


def plan_variants(spec: ExperimentSpec, plan: Plan) -> list[Variant]:
    """The distinct settings of the database component in the trials that run one with a
    workload's database; the all-defaults one first (the ratios' reference), the rest in
    plan order."""
    found: dict[str, Variant] = {}
    for trial in plan.trials:
        stack, workload = STACKS[trial.stack], WORKLOADS[trial.workload]
        name = database_component(stack)
        if name is None or workload.database is None:
            continue
        knobs = effective_knobs(REGISTRY, stack, trial)[name]
        database = workload.database(spec.experiment.seed)
        key = json.dumps([name, knobs, database.key], sort_keys=True)
        defaults = REGISTRY.defaults(name)
        changed = [f"{k}={v}" for k, v in sorted(knobs.items()) if defaults.get(k) != v]
        found.setdefault(key, Variant(knobs, database, " ".join(changed) or "defaults", name))
    if not found:
        stacks = sorted({t.stack for t in plan.trials})
        able = [n for n, c in COMPONENTS.items()
                if any(cap.name == DATABASE for cap in c.capabilities(REGISTRY.defaults(n)))]
        raise SpecError(spec.path, "matrix.stack", stacks, f"no trial runs {' or '.join(able)} "
                        "with a workload that has a database (app-*): dbbench has nothing "
                        "to measure")
    return sorted(found.values(), key=lambda v: v.knobs != REGISTRY.defaults(v.component))


# measuring -----------------------------------------------------------------------

def run_dbbench(env: Environment, bench: DbBenchPlan, store: Store,
                on_stored: Callable[[DbBenchRecord], None] = lambda r: None,
                on_step: Callable[[str], None] = lambda what: None
                ) -> list[DbBenchRecord]:
    """Measure each variant `bench.repetitions` times (bench.steps()), each time on a
    database of its own, in a lab session under env's lab root; each is stored as it
    finishes, dated by env's clock. `on_step` hears what starts next."""
    names = dict.fromkeys(v.component for v in bench.variants)
    versions = {name: COMPONENTS[name].version() for name in names}
    for name in names:          # and its client library's (the connection measured)
        versions |= sql_client(name).library_versions()
    versions |= {"stacklab": __version__}
    records: list[DbBenchRecord] = []
    with lab.session_scope(env.lab_root, sweeps=SWEEPS) as session, CpuAwake() as cpus:
        host = {**host_facts(), **cpus.state()}   # one client connection: CPUs kept awake
        for n, (i, variant) in enumerate(bench.steps()):
            on_step(f"{variant.label} #{i}")
            result = bench_variant(variant, bench.loops, session, f"dbbench-{n}",
                                   bench.seed)
            result |= {"repetition": i, "repetitions": bench.repetitions,
                       "series": records[0].id if records else None}
            record = DbBenchRecord(env.clock(), bench.experiment, variant.knobs, bench.loops,
                                   result, versions, host)
            record = replace(record, id=store.add_dbbench(record))
            records.append(record)
            on_stored(record)
    return records


# a stored series -----------------------------------------------------------------

def group_series(records: list[DbBenchRecord]) -> dict[int, list[DbBenchRecord]]:
    """Stored records by series, each keyed and named by its first record's id, oldest
    first. Records of schema 1 (before repetitions) of one experiment form one series."""
    groups: dict[int, list[DbBenchRecord]] = {}
    legacy: dict[str, int] = {}
    for r in sorted(records, key=lambda r: r.id):
        if "repetition" in r.result:
            key = r.result["series"] or r.id
        else:
            key = legacy.setdefault(r.experiment, r.id)
        groups.setdefault(key, []).append(r)
    return groups


def _variants(records: list[DbBenchRecord]) -> list[list[DbBenchRecord]]:
    """A series' records by variant, in the order first measured (the reference first)."""
    by: dict[str, list[DbBenchRecord]] = {}
    for r in records:
        by.setdefault(r.result["variant"], []).append(r)
    return list(by.values())


def series_summary(records: list[DbBenchRecord]) -> dict[str, Any]:
    """Per variant and query kind, the median µs per query over the repetitions with an
    interval, and the ratio to the reference variant (the first: the defaults when
    measured) with Welch's CI on logs and the verdict (stats.compare, as `compare`)."""
    groups = _variants(records)

    def per_query(rs: list[DbBenchRecord], kind: str) -> list[float]:
        return [v for r in rs if (v := r.result["queries"][kind]["per_query_us_median"])
                is not None]
    variants = []
    for rs in groups:
        queries = {}
        for kind, q in rs[0].result["queries"].items():
            mine = per_query(rs, kind)
            c = compare(per_query(groups[0], kind), mine) if rs is not groups[0] else None
            queries[kind] = {
                "statements_per_loop": q["statements_per_loop"],
                "per_query_us": estimate_doc(mine),
                "total_s": estimate_doc([r.result["queries"][kind]["total_s"] for r in rs]),
                "vs_reference": None if c is None or c.ratio is None else {
                    "ratio": c.ratio, "ci": list(c.ci) if c.ci else None, "p": c.p,
                    # µs a query: lower is better (analyze.decide's vocabulary)
                    **decide(c, None, False, higher_is_better=False).doc(),
                    "text": c.verdict}}
        variants.append({"variant": rs[0].result["variant"], "knobs": rs[0].knobs,
                         "ids": [r.id for r in rs], "repetitions": len(rs),
                         "qcache_hits": [r.result["qcache_hits"] for r in rs],
                         "queries": queries})
    first = records[0]
    return {"schema_version": SUMMARY_VERSION, "kind": "dbbench", "series": first.id,
            "experiment": first.experiment, "created_at": first.created_at,
            "loops": sorted({r.loops for r in records}),
            "reference": groups[0][0].result["variant"], "variants": variants}


def series_entry(records: list[DbBenchRecord]) -> dict[str, Any]:
    """One line of `dbbench --list`."""
    return {"series": records[0].id, "experiment": records[0].experiment,
            "created_at": records[0].created_at, "ids": [r.id for r in records],
            "variants": [rs[0].result["variant"] for rs in _variants(records)],
            "loops": sorted({r.loops for r in records}),
            "repetitions": max(len(rs) for rs in _variants(records))}


def bench_variant(variant: Variant, loops: int, session: lab.Session, name: str,
                  seed: int) -> dict[str, Any]:
    """The database component alone, its one layer the stack's (seeded through its
    lifecycle, checked by check_variant), the loops measured while it runs."""
    run_dir = session.run_dir(name)
    c, what = variant.component, f"{variant.component} ({variant.label})"
    running = RunningStack(StackDef(c, (c,), f"{c} alone: what dbbench measures"))
    deployed = Deployed(name, run_dir, (), {}, variant.database)
    client = sql_client(c)
    stack = StackLayer(running, {c: variant.knobs}, run_dir, lambda: deployed,
                       cache_dir=session.cache(), what=what, verify=check_variant,
                       ready_timeout_s=READY_TIMEOUT_S)
    with Composition((stack,), what).entered() as composed:
        verdicts = composed.verdicts
        started = running.front
        before = client.status(started, ("Qcache_hits", "Questions"))
        queries = _loop(client, started, variant, loops, seed)
        after = client.status(started, ("Qcache_hits", "Questions"))
    db = variant.database
    return {"schema_version": SCHEMA_VERSION, "variant": variant.label, "loops": loops,
            "seed": seed, "database": {"key": db.key, "articles": db.articles,
                                       "authors": db.authors},
            "checks": verdicts[0].data, "queries": queries,
            "qcache_hits": after["Qcache_hits"] - before["Qcache_hits"],
            "questions": after["Questions"] - before["Questions"]}


def sql_client(component: str) -> SqlClient:
    """The database component's own client (it provides database:mysql: it has one)."""
    client = COMPONENTS[component].sql_client()
    if client is None:
        raise StackError(f"{component} provides {DATABASE} but gives no SQL client "
                         "(Component.sql_client)")
    return client


def _loop(client: SqlClient, started: RunningComponent, variant: Variant, loops: int,
          seed: int) -> dict[str, dict[str, Any]]:
    """The loops on one connection as the application's user."""
    db = variant.database
    try:
        conn = client.connect(started, db.user, db.password, db.name)
    except client.errors as e:
        raise StacklabError(f"{variant.component} ({variant.label}): cannot connect as "
                            f"{db.user}: {e}") from e
    try:
        return loop_queries(conn, loops, random.Random(seed))
    except client.errors as e:
        raise StacklabError(f"{variant.component} ({variant.label}): a query failed: "
                            f"{e}") from e
    finally:
        conn.close()


def check_variant(running: RunningStack, deployed: Deployed) -> list[Verdict]:
    """Verify before measuring: the knobs took effect and the data is all there. One
    verdict; its data is what was read (stored with the result as `checks`)."""
    started = running.front
    k, db = started.knobs, deployed.database
    row = sql_client(started.name).query(
        started, "SELECT @@query_cache_type, @@innodb_buffer_pool_size, "
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
        return [Verdict(started.name, "settings and data", Status.FAIL, ", ".join(off),
                        got)]
    return [Verdict(started.name, "settings and data", Status.PASS, "as configured, "
                    f"{got['articles']} articles by {got['authors']} authors", got)]


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
