"""MediaWiki 1.39 as a workload: its seeded wiki (made once for the module), its pages'
markers, a short real run, and verification failing on a missing table and on a PHP
fatal error."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.measure.verify import Status, fetch
from stacklab.run.stack import verify_stack
from stacklab.stacks.mariadb.client import query
from stacklab.workloads import WORKLOADS, deploy, place
from stacklab.workloads import mediawiki as mw
from stacklab.workloads.mediawiki_seed import SEARCH_WORD, all_pages, articles, dump_xml
from stacklab.workloads.mediawiki_settings import local_settings, secrets

from helpers import require_engine, server_processes, shared_session
from test_stacks import assert_all_pass, statuses
from test_workloads import running


# pure: the generated wiki and settings ---------------------------------------------

def test_articles_are_the_seeds_and_use_every_template():
    one, again, other = articles(1, 20), articles(1, 20), articles(2, 20)
    assert one == again and one != other
    assert [a.title for a in one] == [a.title for a in other]    # URLs fixed, text seeded
    for a in one:
        assert "{{Infobox|" in a.text and "{{Navbox|" in a.text and "{{Stub}}" in a.text
        assert SEARCH_WORD in a.text and "[[Category:" in a.text
        assert mw.article_mark(a.title).decode() not in a.text   # only the template says it
    xml = dump_xml(all_pages(1, 20))
    assert xml.count("<page>") == 20 + 4 + 5 and "<title>Template:Infobox</title>" in xml


def test_settings_follow_the_host_and_the_php_knobs():
    text = local_settings(mw.database(3))
    key, upgrade = secrets(3)
    assert f"$wgSecretKey = '{key}';" in text and f"$wgUpgradeKey = '{upgrade}';" in text
    assert len(key) == 64 and secrets(3) != secrets(4)
    assert "$wgServer = WebRequest::detectServer();" in text
    assert "$wgMainCacheType = $stacklabApcu ? CACHE_ACCEL : CACHE_NONE;" in text
    assert "basename(__DIR__) . '.php.log'" in text
    assert "$wgDBname = 'stacklab_app';" in text and "$wgDBuser = 'stacklab';" in text
    seeding = local_settings(mw.database(3), cache_dir="'/tmp/x'", error_log=None)
    assert "ini_set('error_log'" not in seeding and "$wgCacheDirectory = '/tmp/x';" in seeding


def test_settings_quote_as_php_quotes():
    """The database's name, user and password are the AppDatabase's, as PHP single-quoted
    literals: a $ in a password is not interpolated, a quote does not end it."""
    db = replace(mw.database(3), user="wiki", password="pa$s'word\\")
    text = local_settings(db)
    assert "$wgDBuser = 'wiki';" in text
    assert "$wgDBpassword = 'pa$s\\'word\\\\';" in text


def test_every_page_url_has_a_marker():
    files = mw.files(1)
    expected = {f.path: f.expect for f in files if hasattr(f, "expect") and f.expect}
    for page in mw.APP.pages:
        assert WORKLOADS[page.name].php_log
        for url, _ in page.urls:
            assert expected[url].contains, url


# integration: one seeded wiki for the module ------------------------------------------

session = shared_session()


@pytest.fixture(scope="module")
def deployed(session):
    return deploy("mediawiki", session.run_dir("docroot-mediawiki"), seed=1)


@pytest.mark.integration
def test_seeded_wiki_renders_every_page_under_nginx_php_fpm(session, deployed):
    with running(session, "nginx+php-fpm+mariadb", deployed) as stack:
        verdicts = verify_stack(stack, deployed)
        assert_all_pass(verdicts)
        got = statuses(verdicts)
        assert got["stack:php errors"] == "PASS" and got["mariadb:data"] == "PASS"
        ep = stack.front.endpoint
        title = mw._shown()[0]
        page = fetch(ep, mw.article_url(title))
        assert f"Infobox of {title}".encode() in page.body
        assert b'class="stacklab-navbox"' in page.body and b"Category:Stubs" in page.body
        assert f"http://{ep.host}:{ep.port}".encode() in page.body   # $wgServer: the Host
        search = fetch(ep, mw.SEARCH)
        assert search.body.count(b'class="mw-search-result-heading"') == 20
        db = next(s for s in stack.started if s.name == "mariadb")
        [[n]] = query(db.endpoint.unix, "SELECT COUNT(*) FROM stacklab_app.page "
                      "WHERE page_namespace = 0")
        assert int(n) == mw.ARTICLES + 1                  # and the main page
        # Without APCu the parsed articles are kept in MariaDB's objectcache table.
        assert _parsed(db) >= len(mw._shown())


def _parsed(db) -> int:
    """Parser cache entries MariaDB holds (objectcache rows keyed …:pcache:…)."""
    [[n]] = query(db.endpoint.unix, "SELECT COUNT(*) FROM stacklab_app.objectcache "
                  "WHERE keyname LIKE '%pcache%'")
    return int(n)


@pytest.mark.integration
def test_apache_mod_php_with_apcu_keeps_the_parser_cache_out_of_mariadb(session, deployed):
    """APCu on (and OPcache off): every page verified, the parsed articles in APCu."""
    with running(session, "apache+mod_php+mariadb", deployed, php__apcu=True,
                 php__opcache=False) as stack:
        db = next(s for s in stack.started if s.name == "mariadb")
        before = _parsed(db)
        assert_all_pass(verify_stack(stack, deployed))
        assert _parsed(db) == before


RUN = """
[experiment]
name = "mediawiki-short"
description = "one short run of the MediaWiki mix"
repetitions = 1
remeasure = 0
duration = "1s"
warmup = "1s"

[matrix]
stack = ["nginx+php-fpm+mariadb"]
workload = ["mediawiki"]
concurrency = [2]
php.apcu = [true]
"""


@pytest.mark.integration
def test_a_short_real_run_of_the_mix(tmp_path):
    """Through the CLI as a user runs it: seeded, verified, measured, stored; the pages'
    lengths vary by design (their backend time), so no request counts as an error."""
    require_engine()
    spec, db = tmp_path / "mw.toml", tmp_path / "r.db"
    spec.write_text(RUN)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    [(outcome, load)] = sqlite3.connect(db).execute("SELECT outcome, load_json FROM runs")
    load = json.loads(load)
    assert outcome == "ok" and load["requests"]["completed"] > 0
    assert not any(load["requests"]["errors"].values()), load["requests"]["errors"]
    assert server_processes() == []


@pytest.mark.integration
def test_a_php_fatal_error_fails_verification(session, deployed):
    settings = local_settings(mw.database(1)) + "stacklab_no_such_function();\n"
    place(deployed.docroot, "/LocalSettings.php", settings.encode())
    try:
        with running(session, "nginx+php-fpm+mariadb", deployed) as stack:
            verdicts = verify_stack(stack, deployed)
    finally:
        place(deployed.docroot, "/LocalSettings.php", local_settings(mw.database(1)).encode())
    got = statuses(verdicts)
    assert got["stack:php errors"] == "FAIL"
    assert "stacklab_no_such_function" in next(v.detail for v in verdicts
                                               if v.check == "php errors")
    assert any(v.status is Status.FAIL and v.check.startswith("content") for v in verdicts)


@pytest.mark.integration
def test_a_missing_table_fails_verification(session, deployed):
    """Last in the module: the seeded datadir is the session's, used in place, so the
    dropped table stays dropped until the next session seeds again."""
    with running(session, "nginx+php-fpm+mariadb", deployed) as stack:
        db = next(s for s in stack.started if s.name == "mariadb")
        query(db.endpoint.unix, "DROP TABLE stacklab_app.page")
        verdicts = verify_stack(stack, deployed)
    failed = {k for k, v in statuses(verdicts).items() if v == "FAIL"}
    assert f"stack:content {mw.article_url(mw._shown()[0])}" in failed
    assert any(k.startswith("mariadb:") for k in failed), failed
