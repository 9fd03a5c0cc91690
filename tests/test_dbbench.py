"""S1's database method: the statements are the pages' own, variants are planned from a
spec, and a real MariaDB per variant runs them through the CLI in-process."""

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.commands.run import load
from stacklab.dbbench import (BY_ID, COUNTS, KINDS, NODE, ROOT, SHOW, plan_dbbench,
                              plan_variants)
from stacklab.errors import SpecError, StacklabError
from stacklab.workloads.app import SHOW as SHOW_PHP

from test_breakdown import leftovers


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


@pytest.mark.integration
def test_dbbench_stores_every_variant_through_the_cli(tmp_path):
    db = tmp_path / "r" / "stacklab.db"
    result = CliRunner().invoke(cli, ["dbbench", str(spec_file(tmp_path)), "--loops", "50",
                                      "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "query_cache_type=on" in result.output and "vs first" in result.output
    from stacklab.store import Store
    store = Store.open(db)
    try:
        records = store.dbbenches("qc-dbbench")
    finally:
        store.close()
    assert len(records) == 2
    off, on = records
    assert [r.knobs["query_cache_type"] for r in records] == ["off", "on"]
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
