"""phpMyAdmin 5.2 from Debian's package as a workload: deployed with its own configuration
(nothing of /etc/phpmyadmin or /var/lib/phpmyadmin read), logged in to the model
application's seeded database, its pages verified by seeded rows, and verification
failing for a missing table and for a PHP fatal error."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.measure.verify import Status, fetch
from stacklab.run.stack import verify_stack
from stacklab.stacks.mariadb.client import query
from stacklab.workloads import WORKLOADS, deploy, place
from stacklab.workloads import appdata, phpmyadmin as pma

from helpers import require_engine, shared_session
from test_stacks import assert_all_pass, statuses
from test_workloads import running

pytestmark = pytest.mark.integration
ARTICLES = 1000    # the workload's 10,000 take ~10 s to seed; the pages show 25 rows either way
SEED = 5


session = shared_session()


@pytest.fixture(scope="module")
def deployed(session):
    d = deploy("phpmyadmin", session.run_dir("docroot-phpmyadmin"), seed=SEED)
    return replace(d, database=pma.AdminDatabase(SEED, articles=ARTICLES))


@pytest.fixture(scope="module")
def stack(session, deployed):
    """One apache+mod_php stack for the module (the datadir seeded once)."""
    with running(session, "apache+mod_php+mariadb", deployed) as s:
        yield s


def test_pages_are_workloads_with_a_seeded_marker_each(deployed):
    for name in ("phpmyadmin", "phpmyadmin-browse", "phpmyadmin-home"):
        w = WORKLOADS[name]
        assert w.needs == ("php", "database:mysql") and w.php_log and w.cacheable == 0.0
        assert pma.TEMP_DIR in w.writable
    assert dict(WORKLOADS["phpmyadmin-browse"].urls) == {pma.BROWSE: 1}
    # every URL of the mix is checked, each by what the seeded rows put on it
    assert set(deployed.expected) == {u for u, _ in WORKLOADS["phpmyadmin"].urls}
    db = appdata.AppDatabase(SEED)
    title = next(appdata.articles(db)).title
    assert deployed.expected[pma.BROWSE].contains == title[:40].encode()
    assert deployed.expected[pma.AUTHORS].contains == appdata.authors(db)[0][1].encode()
    # the same data, key and datadir as the model application's
    assert pma.database(SEED).key == db.key and pma.database(SEED).tables == db.tables


def test_deployed_with_its_own_configuration_not_debians(deployed):
    root = deployed.docroot
    vendor = (root / "libraries" / "vendor_config.php").read_text()
    config = (root / "config.inc.php").read_text()
    assert "/etc/phpmyadmin" not in vendor + config and "/var/lib" not in vendor + config
    assert "ROOT_PATH . 'config.inc.php'" in vendor
    assert "'auth_type'] = 'config'" in config and "mysqli.default_socket" in config
    assert "$cfg['Servers'][1]['user'] = 'stacklab';" in config
    assert (root / "index.php").is_file() and not (root / "doc").exists()
    assert oct((root / pma.TEMP_DIR.strip("/")).stat().st_mode & 0o7777) == "0o1777"
    # the package's own file is untouched where ours replaced its link
    assert "/etc/phpmyadmin" in (pma.SOURCE / "libraries" / "vendor_config.php").read_text()


def test_verified_under_apache_mod_php(stack, deployed):
    verdicts = verify_stack(stack, deployed)
    assert_all_pass(verdicts)
    got = statuses(verdicts)
    assert {"stack:php errors", "mariadb:data", f"mariadb:queries {pma.BROWSE}"} <= set(got)
    body = fetch(stack.front.endpoint, pma.BROWSE).body
    db = pma.AdminDatabase(SEED, articles=ARTICLES)
    titles = [a.title[:40].encode() for a, _ in zip(appdata.articles(db), range(25))]
    assert all(t in body for t in titles)             # the first 25 rows, browsed
    assert b"phpMyAdmin 5.2" in body and b'auth_type:"config"' in body
    twig = deployed.docroot / pma.TEMP_DIR.strip("/") / "twig"
    assert any(twig.rglob("*.php"))                   # templates compiled once, cached


def test_also_verified_under_nginx_php_fpm_without_opcache(session, deployed, stack):
    """Beside the module's stack: a docroot of its own (a stack places and removes its
    probes there) and a datadir of its own (MyISAM; one server per datadir)."""
    own = replace(deploy("phpmyadmin", session.run_dir("docroot-phpmyadmin-fpm"), seed=SEED),
                  database=deployed.database)
    with running(session, "nginx+php-fpm+mariadb", own, php__opcache=False,
                 mariadb__engine="myisam") as s:
        assert_all_pass(verify_stack(s, own))


def _mariadb(stack):
    return next(s for s in stack.started if s.name == "mariadb").endpoint.unix


def test_a_missing_table_fails_verification(stack, deployed):
    """The browsed table gone from the running database: the browse page shows
    phpMyAdmin's error, not the rows, and the data check counts it missing."""
    sock = _mariadb(stack)
    query(sock, "RENAME TABLE stacklab_app.articles TO stacklab_app.articles_gone")
    try:
        verdicts = verify_stack(stack, deployed)
    finally:
        query(sock, "RENAME TABLE stacklab_app.articles_gone TO stacklab_app.articles")
    got = statuses(verdicts)
    assert got[f"stack:content {pma.BROWSE}"] == "FAIL"
    assert got["mariadb:database"] == "FAIL"      # the count of its rows cannot be taken
    assert "articles" in next(v.detail for v in verdicts if v.check == "database")
    assert got[f"stack:content {pma.AUTHORS}"] == "PASS"
    assert_all_pass(verify_stack(stack, deployed))    # back, and verified again


def test_a_php_fatal_error_fails_verification(stack, deployed):
    """A fatal error in a file every page includes (the custom footer phpMyAdmin loads
    when it exists): the error log's line fails the run even where a page looks whole."""
    footer = place(deployed.docroot, "/config.footer.inc.php",
                   b"<?php stacklab_no_such_function();\n")
    try:
        verdicts = verify_stack(stack, deployed)
    finally:
        footer.unlink()
    php = next(v for v in verdicts if v.check == "php errors")
    assert php.status is Status.FAIL and "PHP Fatal error" in php.detail
    assert "stacklab_no_such_function" in php.detail


def test_a_php_warning_fails_verification(stack, deployed):
    """phpMyAdmin's own error handler keeps a warning for its error-report form and PHP
    never logs it; the handler our configuration chains in front lets PHP log it too, so
    a warning in a file every page includes FAILs even where every page looks whole.
    (The custom header, not the footer: OPcache may still hold the fatal error's footer.)"""
    header = place(deployed.docroot, "/config.header.inc.php",
                   b"<?php echo $stacklab_undefined_variable;\n")
    try:
        verdicts = verify_stack(stack, deployed)
    finally:
        header.unlink()
    got = statuses(verdicts)
    assert got[f"stack:content {pma.BROWSE}"] == "PASS"
    php = next(v for v in verdicts if v.check == "php errors")
    assert php.status is Status.FAIL and "PHP Warning" in php.detail
    assert "stacklab_undefined_variable" in php.detail


SPEC = """[experiment]
remeasure = 0
name = "phpmyadmin-short"
repetitions = 1
duration = "2s"
warmup = "1s"
[matrix]
stack = ["apache+mod_php+mariadb"]
workload = ["phpmyadmin-browse"]
concurrency = [4]
"""


def test_a_short_run_under_apache_mod_php(tmp_path):
    """The CLI's run, end to end: deployed, seeded (the workload's own size), verified,
    measured and stored ok."""
    require_engine()
    spec, db = tmp_path / "pma.toml", tmp_path / "r.db"
    spec.write_text(SPEC)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    [(outcome, completed)] = sqlite3.connect(db).execute(
        "SELECT outcome, json_extract(load_json, '$.requests.completed') FROM runs")
    assert outcome == "ok" and completed > 0


def test_the_preset_plans(tmp_path):
    result = CliRunner().invoke(cli, ["run", str(Path("presets/phpmyadmin.toml")),
                                      "--dry-run", "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 0, result.output
    assert "phpmyadmin-browse" in result.output
