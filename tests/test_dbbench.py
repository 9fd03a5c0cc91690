"""S1's database method: the statements are the pages' own, variants are planned from a
spec, and a real MariaDB per variant runs them through the CLI in-process."""

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.commands.run import load
from stacklab.methods.dbbench import (BY_ID, COUNTS, KINDS, NODE, ROOT, SHOW, group_series,
                              plan_dbbench, plan_variants, series_summary)
from stacklab.errors import SpecError, StacklabError
from stacklab.store import DbBenchRecord, Store
from stacklab.workloads.app import SHOW as SHOW_PHP

from test_breakdown import leftovers

SCHEMA = json.loads((Path(__file__).parent.parent / "stacklab" / "report" / "schemas" /
                     "dbbench.schema.json").read_text())


QC = """
[experiment]
name = "qc-dbbench"
requests = 100

[matrix]
stack = ["nginx+php-fpm+mariadb", "nginx"]
workload = ["app-show", "static-page"]
concurrency = [1, 4]
mariadb.query_cache_type = [{values}]
exclude = [{{stack = "nginx", workload = "app-show"}}]
"""


NO_DB = (QC.replace('"nginx+php-fpm+mariadb", ', "").replace('"app-show", ', "")
         .replace("mariadb.query_cache_type = [{values}]\n", "").replace(
             'exclude = [{{stack = "nginx", workload = "app-show"}}]\n', ""))


def spec_file(tmp_path, values='"off", "on"', text=QC):
    path = tmp_path / "qc.toml"
    path.write_text(text.format(values=values))
    return path


def test_statements_are_the_pages_own():
    php = SHOW_PHP.decode()
    select = SHOW.removesuffix(" ORDER BY a.published DESC LIMIT 50")
    assert f"'{select}'" in php                       # byte for byte, for the query cache
    assert "' ORDER BY a.published DESC LIMIT 50'" in php
    assert "str_replace('a.published,', 'a.published, a.body,', SL_SELECT)" in php
    assert BY_ID == select.replace("a.published,", "a.published, a.body,") + " WHERE a.id = "
    assert "' WHERE a.id = '" in php
    for sql in (*COUNTS, ROOT):
        assert f"'{sql}'" in php
    assert f"'{NODE}' . $id" in php


@pytest.mark.parametrize("values", ['"off", "on"', '"on", "off"'])
def test_variants_defaults_first_and_once_each(tmp_path, values):
    spec, plan = load(spec_file(tmp_path, values))
    variants = plan_variants(spec, plan)
    assert [v.label for v in variants] == ["defaults", "query_cache_type=on"]
    assert [v.knobs["query_cache_type"] for v in variants] == ["off", "on"]
    assert {v.database.seed for v in variants} == {spec.experiment.seed}


def test_a_spec_without_mariadb_is_refused_naming_the_stacks(tmp_path):
    text = NO_DB
    spec, plan = load(spec_file(tmp_path, text=text))
    with pytest.raises(SpecError, match=r"matrix.stack = \['nginx'\]: no trial runs mariadb"):
        plan_variants(spec, plan)


def test_loops_must_be_positive(tmp_path):
    spec, plan = load(spec_file(tmp_path))
    with pytest.raises(StacklabError, match="--loops 0"):
        plan_dbbench(spec, plan, 0)
    with pytest.raises(StacklabError, match="--repetitions 0"):
        plan_dbbench(spec, plan, 10, 0)


def test_repetitions_go_round_by_round(tmp_path):
    spec, plan = load(spec_file(tmp_path))
    bench = plan_dbbench(spec, plan, 10, 2)
    assert [(i, v.label) for i, v in bench.steps()] == [
        (1, "defaults"), (1, "query_cache_type=on"), (2, "defaults"),
        (2, "query_cache_type=on")]


@pytest.mark.integration
def test_dbbench_stores_every_variant_through_the_cli(tmp_path):
    db = tmp_path / "r" / "stacklab.db"
    result = CliRunner().invoke(cli, ["dbbench", str(spec_file(tmp_path)), "--loops", "50",
                                      "--repetitions", "3", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "query_cache_type=on" in result.output and "vs defaults" in result.output
    assert "stored dbbench 6: query_cache_type=on #3" in result.output
    assert "6/6" in result.output                                     # progress, i/N
    store = Store.open(db)
    try:
        records = store.dbbenches("qc-dbbench")
    finally:
        store.close()
    # every repetition stored, round by round, one series named by the first
    assert len(records) == 6
    assert [(r.result["repetition"], r.result["variant"]) for r in records] == [
        (i, v) for i in (1, 2, 3) for v in ("defaults", "query_cache_type=on")]
    assert [r.result["series"] for r in records] == [None] + [1] * 5
    shown = CliRunner().invoke(cli, ["dbbench", "--show", "qc-dbbench", "--json",
                                     "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    summary = json.loads(shown.output)
    jsonschema.validate(summary, SCHEMA)
    defaults, cached = summary["variants"]
    assert defaults["ids"] == [1, 3, 5] and cached["ids"] == [2, 4, 6]
    for v in summary["variants"]:
        for q in v["queries"].values():
            e = q["per_query_us"]
            assert len(e["values"]) == 3 and e["ci"][0] <= e["median"] <= e["ci"][1]
    # the cached variant against the defaults, with its interval (whether it is faster is
    # timing, 3 against 3 on a shared host: the cache's hits are checked below instead)
    show = cached["queries"]["show"]["vs_reference"]
    assert 0 < show["ratio"] and show["ci"][0] <= show["ratio"] <= show["ci"][1]
    assert defaults["queries"]["show"]["vs_reference"] is None
    off, on = records[:2]
    assert [r.knobs["query_cache_type"] for r in records[:2]] == ["off", "on"]
    for r in records:
        assert r.loops == 50 and r.experiment == "qc-dbbench"
        assert {"mariadb", "pymysql", "stacklab"} <= set(r.versions) and r.host["cores"] >= 1
        q = r.result["queries"]
        assert set(q) == set(KINDS)
        assert q["counts"]["statements_per_loop"] == 2 and q["show"]["statements_per_loop"] == 1
        assert q["id"]["statements_per_loop"] == 5 and q["tree"]["statements_per_loop"] > 1
        assert q["show"]["rows_per_loop"] == 50 and q["id"]["rows_per_loop"] == 5
        for kind in KINDS:
            assert q[kind]["total_s"] > 0 and q[kind]["per_query_us_median"] > 0
        assert r.result["checks"]["articles"] == 10_000
        # every statement of the loops (plus the first count) reached the server
        per_loop = sum(q[k]["statements_per_loop"] for k in KINDS)
        assert r.result["questions"] >= 50 * per_loop + 1
    assert off.result["qcache_hits"] == 0 and on.result["qcache_hits"] > 0
    assert leftovers() == []


@pytest.mark.integration
def test_bad_spec_through_the_cli_is_one_line(tmp_path):
    text = NO_DB
    result = CliRunner().invoke(cli, ["dbbench", str(spec_file(tmp_path, text=text)),
                                      "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "matrix.stack = ['nginx']" in result.output
    assert not (tmp_path / "x.db").exists()


# stored series, listed and shown without servers -----------------------------------

def queries(us):
    return {kind: {"statements_per_loop": 2, "rows_per_loop": 2, "total_s": us / 1e4,
                   "per_loop_us_median": 2 * us, "per_query_us_median": us}
            for kind in KINDS}


def record(label, qc, us, repetition=None, series=None, hits=0):
    """A dbbench record as stored: schema 2 with its repetition, or (repetition None) as
    schema 1 stored it, before repetitions."""
    result = {"schema_version": 1, "variant": label, "loops": 10, "seed": 1,
              "queries": queries(us), "qcache_hits": hits, "questions": 100}
    if repetition is not None:
        result |= {"schema_version": 2, "repetition": repetition, "repetitions": 3,
                   "series": series}
    return DbBenchRecord("2026-01-02T03:04:05.000+00:00", "qc", {"query_cache_type": qc}, 10,
                         result, {}, {})


@pytest.fixture
def stored_db(tmp_path):
    """Two old records (schema 1, ids 1-2: one series), then a series of 3 × 2 (3-8)."""
    db = tmp_path / "s.db"
    store = Store.open(db)
    try:
        for r in [record("defaults", "off", 100.0), record("query_cache_type=on", "on", 50.0)]:
            store.add_dbbench(r)
        for i, (a, b) in enumerate([(100.0, 50.0), (104.0, 52.0), (98.0, 49.0)], 1):
            store.add_dbbench(record("defaults", "off", a, i, None if i == 1 else 3))
            store.add_dbbench(record("query_cache_type=on", "on", b, i, 3, hits=7))
    finally:
        store.close()
    return db


def test_a_series_gives_medians_intervals_and_ratios_to_the_defaults(stored_db):
    store = Store.open(stored_db)
    try:
        groups = group_series(store.dbbenches())
    finally:
        store.close()
    assert {k: [r.id for r in rs] for k, rs in groups.items()} == {1: [1, 2],
                                                                   3: [3, 4, 5, 6, 7, 8]}
    summary = series_summary(groups[3])
    jsonschema.validate(summary, SCHEMA)
    defaults, cached = summary["variants"]
    assert summary["reference"] == "defaults" and cached["ids"] == [4, 6, 8]
    e = cached["queries"]["show"]["per_query_us"]
    assert (e["median"], e["ci"], e["values"]) == (50.0, [49.0, 52.0], [50.0, 52.0, 49.0])
    vs = cached["queries"]["show"]["vs_reference"]
    assert vs["ratio"] == pytest.approx(0.5) and vs["verdict"] == "better"   # µs: lower
    assert vs["ci"][0] <= 0.5 <= vs["ci"][1] and vs["text"] == "-50.0%"
    assert cached["qcache_hits"] == [7, 7, 7]
    old = series_summary(groups[1])        # schema 1: one repetition each, no interval
    jsonschema.validate(old, SCHEMA)
    assert old["variants"][1]["queries"]["show"]["per_query_us"]["ci"] is None
    fewer = old["variants"][1]["queries"]["show"]["vs_reference"]
    assert (fewer["verdict"], fewer["reason"]) == ("no-verdict", "few-runs")
    assert fewer["text"].startswith("no verdict")


def test_stored_dbbenches_are_listed_and_shown_without_measuring(stored_db):
    listed = CliRunner().invoke(cli, ["dbbench", "--list", "--json", "--db", str(stored_db)])
    assert listed.exit_code == 0, listed.output
    doc = json.loads(listed.output)
    jsonschema.validate(doc, SCHEMA)
    assert [(e["series"], e["repetitions"], e["variants"]) for e in doc["dbbenches"]] == [
        (1, 1, ["defaults", "query_cache_type=on"]),
        (3, 3, ["defaults", "query_cache_type=on"])]
    text = CliRunner().invoke(cli, ["dbbench", "--list", "--db", str(stored_db)]).output
    assert "3–8" in text and "qc" in text
    latest = CliRunner().invoke(cli, ["dbbench", "--show", "qc", "--db", str(stored_db)])
    assert latest.exit_code == 0, latest.output
    assert "dbbench 3: qc" in latest.output
    assert "0.50×" in latest.output and "-50.0%" in latest.output
    assert "range 49.0–52.0" in latest.output
    old = CliRunner().invoke(cli, ["dbbench", "--show", "2", "--db", str(stored_db)])
    assert old.exit_code == 0 and "dbbench 1: qc" in old.output


@pytest.mark.parametrize("args, line", [
    (["--show", "nope"], "--show nope: no dbbench of experiment or id 'nope' in "),
    (["--show", "99"], "--show 99: no dbbench"),
    (["qc.toml", "--show", "qc"], "SPEC: measures; --list and --show"),
    (["--list", "--show", "qc"], "--list and --show qc: one or the other"),
    (["--json"], "--json: with --list or --show"),
    ([], "SPEC: needed to measure"),
])
def test_stored_forms_refuse_in_one_line_naming_the_flag(stored_db, args, line):
    result = CliRunner().invoke(cli, ["dbbench", *args, "--db", str(stored_db)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"stacklab: error: {line}"), result.output
    assert result.output.count("\n") == 1
