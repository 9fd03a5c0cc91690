"""S1's overview method: validation tables, the share arithmetic, and real stacks on
loopback through the CLI in-process."""

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.breakdown import (NETWORK_NOTE, _split, parse_knob, plan_breakdown,
                                run_breakdown, server_timing, shares)
from stacklab.cli import cli
from stacklab.env import Environment
from stacklab.errors import StacklabError, UsageError
from stacklab.store import Store

from helpers import require_engine


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
    assert result["schema_version"] == 2 and result["network_ms"] is None
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
                                      "mariadb.query_cache_type=off", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "keep-alive on: database" in result.output and "loopback only" in result.output
    store = Store.open(db)
    try:
        record = store.breakdown(1)
    finally:
        store.close()
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
    with pytest.raises(StacklabError, match="no breakdown 2"):
        Store.open(tmp_path / "s.db").breakdown(2)
