"""S1's overview method: validation tables, the share arithmetic, and real stacks on
loopback through the CLI in-process."""

import json
import os
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from stacklab.methods.breakdown import (NETWORK_NOTE, SCHEMA_VERSION, _split, group_series,
                                parse_knob, plan_breakdown, run_breakdown, series_summary,
                                server_timing, shares)
from stacklab.cli import cli
from stacklab.env import Environment
from stacklab.errors import StacklabError, UsageError
from stacklab.store import BreakdownRecord, Store

from helpers import require_engine

SCHEMA = json.loads((Path(__file__).parent.parent / "stacklab" / "report" / "schemas" /
                     "breakdown.schema.json").read_text())


def leftovers() -> list[str]:
    """Processes still running from this test process's own lab sessions (other test runs
    may share the lab directory, so server_processes() would see theirs)."""
    mark = f"/s-{os.getpid()}-".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if mark in cmdline:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


# pure ------------------------------------------------------------------------------

@pytest.mark.parametrize("arg, want", [
    ("php.opcache=false", ("php.opcache", False)),
    ("php.opcache=On", ("php.opcache", True)),
    ("mariadb.query_cache_type=on", ("mariadb.query_cache_type", "on")),
    ("mariadb.innodb_buffer_pool_size_mb = 256", ("mariadb.innodb_buffer_pool_size_mb", 256)),
])
def test_knob_arguments_are_typed_by_the_registry(arg, want):
    assert parse_knob(arg) == want


@pytest.mark.parametrize("arg, named", [
    ("php.opcache", "php.opcache"),                       # no value
    ("nginx.bogus=1", "nginx.bogus"),                     # unknown knob
    ("php.opcache=maybe", "php.opcache=maybe"),           # not a bool
    ("mariadb.query_cache_type=sometimes", "sometimes"),  # not a choice
    ("mariadb.innodb_buffer_pool_size_mb=1", "innodb_buffer_pool_size_mb"),  # below min
    ("mariadb.innodb_buffer_pool_size_mb=lots", "lots"),  # not an int
])
def test_bad_knob_arguments_name_the_value(arg, named):
    with pytest.raises(UsageError, match=named):
        parse_knob(arg)


@pytest.mark.parametrize("stack, workload, knobs, named", [
    ("nope", "app-show", [], "'nope'"),
    ("varnish > nginx+php-fpm+mariadb", "app-show", [], "varnish in front would replay"),
    ("squid > apache * 2", "app-show", [], "squid cannot spread over 2 replicas"),
    ("nginx", "nope", [], "'nope'"),
    ("nginx", "app-show", [], "needs php"),
    ("nginx+php-fpm", "app-show", [], "needs database:mysql"),
    ("nginx", "static-page", ["php.opcache=false"], "does not apply to stack 'nginx'"),
    ("nginx", "static-page", ["load.keepalive=false"], "sets the load itself"),
    ("nginx+php-fpm", "php-page", ["nginx.php=none"], "fixes nginx.php"),
])
def test_bad_input_is_refused_before_anything_starts(stack, workload, knobs, named):
    with pytest.raises(StacklabError, match=named):
        plan_breakdown(stack, workload, knobs, 10)


def test_requests_must_be_positive():
    with pytest.raises(UsageError, match="--requests 0"):
        plan_breakdown("nginx", "static-page", [], 0)


def test_repetitions_must_be_positive():
    with pytest.raises(UsageError, match="--repetitions 0"):
        plan_breakdown("nginx", "static-page", [], 10, repetitions=0)


def test_server_timing_header():
    assert server_timing("db;dur=0.812, php;dur=0.650") == {"db": 0.812, "php": 0.65}
    assert server_timing(None) == {}
    assert server_timing("") == {}


@pytest.mark.parametrize("total, db, php", [(3.2, 0.86, 0.68), (1.0, 0.0, 0.1),
                                            (0.2, None, None), (1.0, 0.9, 0.3)])
def test_shares_add_up_to_the_total(total, db, php):
    rows = shares(total, db, php, "apache")
    measured = [r for r in rows if r["ms"] is not None]
    assert sum(r["ms"] for r in measured) == pytest.approx(total)
    assert sum(r["percent"] for r in measured) == pytest.approx(100)
    assert [r["component"] for r in rows][-2:] == ["web server (apache)", "network"]
    assert rows[-1]["ms"] is None and rows[-1]["note"] == NETWORK_NOTE
    assert ("database" in {r["component"] for r in rows}) == (db is not None)


def test_split_into_rounds():
    assert _split(10, 4) == [3, 3, 2, 2]
    assert _split(3, 5) == [1, 1, 1, 0, 0]
    assert sum(_split(200, 5)) == 200


# real stacks -----------------------------------------------------------------------

def _check_shape(result, requests):
    assert result["schema_version"] == SCHEMA_VERSION and result["network_ms"] is None
    assert result["network"] == {"mode": "loopback"}
    for url in result["urls"]:
        assert [m["keepalive"] for m in url["measurements"]] == [False, True]
        for m in url["measurements"]:
            assert m["completed"] == requests and m["failed"] == 0
            assert m["total_ms"] > 0 and m["ttfb_ms"] > 0
            measured = [r["ms"] for r in m["shares"] if r["ms"] is not None]
            assert sum(measured) == pytest.approx(m["total_ms"], rel=0.05)
            assert m["shares"][-1]["component"] == "network"


@pytest.mark.integration
def test_breakdown_of_the_model_application_through_the_cli(tmp_path):
    require_engine()
    db = tmp_path / "r" / "stacklab.db"
    result = CliRunner().invoke(cli, ["breakdown", "nginx+php-fpm+mariadb", "app-show",
                                      "--requests", "60", "--knob",
                                      "mariadb.query_cache_type=off", "--repetitions", "3",
                                      "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "keep-alive on: database" in result.output and "loopback only" in result.output
    assert "3/3 loopback" in result.output and "3/3" in result.output     # progress
    assert "stored breakdown 3: repetition 3 of 3" in result.output
    assert "medians of 3 repetition(s)" in result.output and "range " in result.output
    store = Store.open(db)
    try:
        records = store.breakdowns()
    finally:
        store.close()
    # every repetition stored, one series named by the first
    assert [r.id for r in records] == [1, 2, 3]
    assert [r.result["repetition"] for r in records] == [1, 2, 3]
    assert [r.result["series"] for r in records] == [None, 1, 1]
    for r in records:
        _check_shape(r.result, 60)
    record = records[0]
    shown = CliRunner().invoke(cli, ["breakdown", "--show", "2", "--json", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    summary = json.loads(shown.output)
    jsonschema.validate(summary, SCHEMA)
    assert summary["ids"] == [1, 2, 3] and summary["repetitions"] == 3
    for m in summary["urls"][0]["measurements"]:
        for e in [m["total_ms"]] + [r["ms"] for r in m["shares"] if r["ms"]]:
            assert len(e["values"]) == 3 and e["ci"][0] <= e["median"] <= e["ci"][1]
    assert (record.stack, record.workload) == ("nginx+php-fpm+mariadb", "app-show")
    assert record.knobs == {"mariadb.query_cache_type": "off"}
    assert {"nginx", "php-fpm", "mariadb", "stacklab-load"} <= set(record.versions)
    assert record.host["cores"] >= 1
    _check_shape(record.result, 60)
    [url] = record.result["urls"]
    assert url["path"] == "/showArticle.php?show=1"
    for m in url["measurements"]:
        parts = {r["component"]: r["ms"] for r in m["shares"]}
        assert set(parts) == {"database", "php", "web server (nginx)", "network"}
        assert parts["database"] > 0 and parts["php"] > 0
        assert m["server_timing"]["samples"] == 50
    assert m["connect_ms"] is None and url["measurements"][0]["connect_ms"] > 0
    assert leftovers() == []


@pytest.mark.integration
def test_breakdown_of_a_static_page_is_all_web_server(tmp_path):
    require_engine()
    record = run_breakdown(plan_breakdown("nginx", "static-page", [], 50),
                           Environment.default())
    _check_shape(record.result, 50)
    for m in record.result["urls"][0]["measurements"]:
        assert m["server_timing"] is None
        assert [r["component"] for r in m["shares"]] == ["web server (nginx)", "network"]
        assert m["shares"][0]["percent"] == pytest.approx(100)
    store = Store.open(tmp_path / "s.db")
    try:
        stored = store.breakdown(store.add_breakdown(record))
    finally:
        store.close()
    assert stored.result == record.result and stored.knobs == {} and stored.id == 1
    assert record.result["repetition"] == record.result["repetitions"] == 1
    with pytest.raises(StacklabError, match="no breakdown 2"):
        Store.open(tmp_path / "s.db").breakdown(2)


# stored series, listed and shown without servers -----------------------------------

def stored_result(total, db, php, repetition=None, series=None):
    """A breakdown result as stored: schema 3 with its repetition, or (repetition None)
    as schema 2 stored it, before repetitions."""
    def m(keepalive):
        return {"keepalive": keepalive, "completed": 10, "failed": 0, "total_ms": total,
                "ttfb_ms": total * 0.9, "connect_ms": None if keepalive else 0.04,
                "server_timing": {"samples": 5, "db_ms": db, "php_ms": php}, "veth": None,
                "network_ms": None, "shares": shares(total, db, php, "nginx"), "flags": []}
    doc = {"schema_version": 2, "stack": "nginx+php-fpm+mariadb", "workload": "app-show",
           "front": "nginx", "requests": 10, "timing_samples": 5,
           "network": {"mode": "loopback"}, "network_ms": None, "network_note": NETWORK_NOTE,
           "urls": [{"path": "/showArticle.php?show=1",
                     "measurements": [m(False), m(True)]}]}
    if repetition is not None:
        doc |= {"schema_version": 3, "repetition": repetition, "repetitions": 3,
                "series": series}
    return doc


@pytest.fixture
def stored_db(tmp_path):
    """An old record (schema 2, id 1), then a series of three (ids 2-4)."""
    db = tmp_path / "s.db"
    store = Store.open(db)
    try:
        for result in (stored_result(3.0, 0.9, 0.7),
                       stored_result(2.0, 0.5, 0.6, 1, None),
                       stored_result(2.4, 0.6, 0.7, 2, 2),
                       stored_result(2.2, 0.4, 0.8, 3, 2)):
            store.add_breakdown(BreakdownRecord("2026-01-02T03:04:05.000+00:00",
                                                "nginx+php-fpm+mariadb", "app-show",
                                                {"php.opcache": True}, result, {}, {}))
    finally:
        store.close()
    return db


def test_a_series_is_summarized_as_medians_with_intervals(stored_db):
    store = Store.open(stored_db)
    try:
        groups = group_series(store.breakdowns())
    finally:
        store.close()
    assert {k: [r.id for r in rs] for k, rs in groups.items()} == {1: [1], 2: [2, 3, 4]}
    summary = series_summary(groups[2])
    jsonschema.validate(summary, SCHEMA)
    off = summary["urls"][0]["measurements"][0]
    assert off["total_ms"]["median"] == 2.2 and off["total_ms"]["ci"] == [2.0, 2.4]
    assert off["total_ms"]["is_range"] and off["total_ms"]["ci_level"] == 0.75
    database = off["shares"][0]
    assert database["component"] == "database" and database["ms"]["values"] == [0.5, 0.6, 0.4]
    assert off["shares"][-1]["ms"] is None          # no network share on loopback
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in summary.items() if k != "urls"}, SCHEMA)
    old = series_summary(groups[1])                 # schema 2: a series of one, no interval
    jsonschema.validate(old, SCHEMA)
    assert old["repetitions"] == old["planned_repetitions"] == 1
    assert old["urls"][0]["measurements"][0]["total_ms"]["ci"] is None


def test_stored_breakdowns_are_listed_and_shown_without_measuring(stored_db):
    listed = CliRunner().invoke(cli, ["breakdown", "--list", "--json", "--db",
                                      str(stored_db)])
    assert listed.exit_code == 0, listed.output
    doc = json.loads(listed.output)
    jsonschema.validate(doc, SCHEMA)
    assert [(e["series"], e["ids"], e["repetitions"]) for e in doc["breakdowns"]] == [
        (1, [1], 1), (2, [2, 3, 4], 3)]
    text = CliRunner().invoke(cli, ["breakdown", "--list", "--db", str(stored_db)]).output
    assert "php.opcache=True" in text and "2–4" in text
    shown = CliRunner().invoke(cli, ["breakdown", "--show", "3", "--db", str(stored_db)])
    assert shown.exit_code == 0, shown.output
    assert "breakdown 2: nginx+php-fpm+mariadb app-show php.opcache=True" in shown.output
    assert "range 2.000–2.400" in shown.output
    assert "medians of 3 repetition(s)" in shown.output
    assert "keep-alive off: database 0.50 ms" in shown.output
    old = CliRunner().invoke(cli, ["breakdown", "--show", "1", "--db", str(stored_db)])
    assert old.exit_code == 0 and "medians of 1 repetition(s)" in old.output


@pytest.mark.parametrize("args, line", [
    (["--show", "9"], "--show 9: no breakdown 9 in "),
    (["--show", "x"], "--show x: an id"),
    (["--list", "--show", "1"], "--list and --show 1: one or the other"),
    (["nginx", "static-page", "--list"], "STACK WORKLOAD: measures; --list and --show"),
    (["--json"], "--json: with --list or --show"),
    (["nginx"], "STACK and WORKLOAD: both needed"),
])
def test_stored_forms_refuse_in_one_line_naming_the_flag(stored_db, args, line):
    result = CliRunner().invoke(cli, ["breakdown", *args, "--db", str(stored_db)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"stacklab: error: {line}"), result.output
    assert result.output.count("\n") == 1


def test_listing_a_missing_database_says_so_and_creates_none(tmp_path):
    result = CliRunner().invoke(cli, ["breakdown", "--list", "--db", str(tmp_path / "no.db")])
    assert result.exit_code != 0 and "no results database" in result.output
    assert not (tmp_path / "no.db").exists()
