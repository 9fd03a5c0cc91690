"""S1's model application against a real MariaDB, PHP and web server on loopback."""

import re
from dataclasses import replace

import pytest

from stacklab.run.stack import verify_stack
from stacklab.stacks import COMPONENTS
from stacklab.stacks.mariadb.client import query
from stacklab.stacks.mariadb.seed import STAMP, ensure_datadir
from stacklab.measure.verify import Status, fetch
from stacklab.workloads import deploy
from stacklab.workloads.appdata import AppDatabase, root, subtree

from test_stacks import assert_all_pass, statuses
from test_workloads import running
from helpers import shared_session

pytestmark = pytest.mark.integration
ARTICLES = 1000   # the study's 10,000 take ~10 s to seed; the pages do the same work


session = shared_session()


def app(session, database=None):
    deployed = deploy("app-mix", session.run_dir("docroot-app-mix"), seed=5)
    return replace(deployed, database=database or AppDatabase(5, articles=ARTICLES))


def timing(resp) -> dict[str, float]:
    return {m[0]: float(m[1]) for m in
            re.findall(r"(\w+);dur=([\d.]+)", resp.headers["server-timing"])}


def test_model_application_pages(session):
    deployed = app(session)
    db = deployed.database
    with running(session, "nginx+php-fpm+mariadb", deployed) as stack:
        verdicts = verify_stack(stack, deployed)
        assert_all_pass(verdicts)
        got = statuses(verdicts)
        assert {"mariadb:data", "mariadb:queries /showArticle.php?tree=1",
                "mariadb:query cache"} <= set(got)
        ep = stack.front.endpoint
        counts = f"articles: {ARTICLES}, authors: 50".encode()

        show = fetch(ep, "/showArticle.php?show=1")
        assert counts in show.body and show.body.count(b'class="article"') == 50
        assert fetch(ep, "/showArticle.php?show=1").body == show.body   # the same rows

        ids = fetch(ep, "/showArticle.php?id=1")
        assert counts in ids.body and ids.body.count(b'class="article"') == 5

        tree = fetch(ep, "/showArticle.php?tree=1")
        shown = [(int(d), int(i)) for i, d in
                 re.findall(rb'data-id="(\d+)" data-depth="(\d)"', tree.body)]
        assert shown == subtree(db, root(db))
        assert len(shown) > 1

        for resp in (show, ids, tree):
            t = timing(resp)
            assert set(t) == {"db", "php"}
            assert 0 < t["db"] < 5000 and 0 < t["php"] < 5000
        index = fetch(ep, "/index.php")
        assert timing(index)["db"] == 0 and b"stacklab app index ok" in index.body

        datadir = next(s for s in stack.started if s.name == "mariadb").ctx.cache_dir
        assert len(list(datadir.glob(f"mariadb-*/{STAMP}"))) == 1


def test_seeded_datadir_is_reused_and_engine_knob_applies(session):
    deployed = app(session)
    with running(session, "nginx+php-fpm+mariadb", deployed, mariadb__engine="myisam",
                 mariadb__query_cache_type="on") as stack:
        assert_all_pass(verify_stack(stack, deployed))
        db = next(s for s in stack.started if s.name == "mariadb")
        engines = query(db.endpoint.unix, "SELECT DISTINCT ENGINE FROM information_schema."
                        "TABLES WHERE TABLE_SCHEMA = 'stacklab_app'")
        assert engines == [["MyISAM"]]
        assert "hits on a repeated page" in next(
            v.detail for v in verify_stack(stack, deployed) if v.check == "query cache")
    datadir = db.ctx.cache_dir / next(p.parent.name for p in db.ctx.cache_dir.glob(
        f"mariadb-*-myisam/{STAMP}"))
    made = (datadir / STAMP).stat().st_mtime_ns
    assert not ensure_datadir(datadir, deployed.database, "myisam", db.ctx.run_dir,
                              COMPONENTS["mariadb"].binary)      # seeded once, then reused
    assert (datadir / STAMP).stat().st_mtime_ns == made


def test_apache_mod_php_runs_the_model_application(session):
    deployed = app(session)
    with running(session, "apache+mod_php+mariadb", deployed) as stack:
        assert_all_pass(verify_stack(stack, deployed))


def test_verify_fails_on_an_empty_database(session):
    deployed = app(session, AppDatabase(5, authors=0, articles=0))
    with running(session, "nginx+php-fpm+mariadb", deployed) as stack:
        verdicts = verify_stack(stack, deployed)
    got = statuses(verdicts)
    assert got["mariadb:data"] == "FAIL"
    assert got["mariadb:queries /showArticle.php?show=1"] == "FAIL"
    assert "read no rows" in next(v.detail for v in verdicts
                                  if v.check == "queries /showArticle.php?show=1")
    assert any(v.status is Status.FAIL for v in verdicts)


def test_mariadb_version_and_knob_sources():
    assert re.match(r"\d+\.\d+\.\d+", COMPONENTS["mariadb"].version())
    # every setting comes from S1; the user's own file (mariadb.cnf_extra) is no study's
    assert all(k.source == "S1" for k in COMPONENTS["mariadb"].knobs if not k.path)
