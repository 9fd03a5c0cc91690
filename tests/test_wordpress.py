"""WordPress 6.1 as a workload: seeded by its own installer (once for the module), each
page verified by its seeded content under real servers, the logged-in page with its
cookie and never from a cache, and verification failing on a missing table and on a
PHP fatal error."""

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.measure.verify import Status, fetch
from stacklab.run.layercheck import layer_verdicts
from stacklab.run.stack import verify_stack
from stacklab.stacks import REGISTRY, STACKS
from stacklab.stacks.mariadb.client import query
from stacklab.workloads import WORKLOADS, deploy, place
from stacklab.workloads.wordpress import ADMIN, FRONT, POSTS, REST, SEARCHES, content
from stacklab.workloads.wordpress_seed import SEARCH_WORDS, make_content
from stacklab.workloads.wordpress_site import login_cookie

from helpers import require_engine, server_processes, shared_session
from test_stacks import assert_all_pass, statuses
from test_workloads import running

PAGES = ("wordpress-front", "wordpress-post", "wordpress-search", "wordpress-rest",
         "wordpress-admin", "wordpress")
DB_STACK = "nginx+php-fpm+mariadb"


session = shared_session()


def deployed(session, name, seed=1):
    return deploy(name, session.run_dir("docroot-wordpress"), seed=seed)


# the seeded content and the pages' markers (no server) -------------------------------

def test_content_is_the_seeds_alone():
    a, b = make_content(7, 50, 3, 4), make_content(7, 50, 3, 4)
    assert a == b and make_content(8, 50, 3, 4) != a
    assert len({p.title for p in a.posts}) == 50          # unique titles: good markers
    assert a.latest == a.posts[-1]
    for word, ids in a.search.items():                   # each search word in its posts only
        assert [p.id for p in a.posts if word in p.title or word in p.content] == list(ids)


def test_every_page_has_a_seeded_marker():
    site = content(1)
    for name in PAGES:
        d = WORKLOADS[name]
        assert d.php_log and d.needs == ("php", "database:mysql")
    files = {f.path: f.expect for f in WORKLOADS["wordpress"].build(1)
             if hasattr(f, "expect") and f.expect is not None}
    latest = site.latest.title.encode()
    assert files[FRONT].contains == latest and latest in files[REST].contains
    assert files[ADMIN].contains == latest and files[ADMIN].headers == (
        ("Cookie", login_cookie()),)
    for path, word in zip(SEARCHES, SEARCH_WORDS):
        assert word.encode() in files[path].contains
    for post_id in POSTS:
        assert files[f"/?p={post_id}"].contains
    mix = {p for p, _ in WORKLOADS["wordpress"].urls}
    assert ADMIN not in mix and {FRONT, REST, *SEARCHES} <= mix
    assert WORKLOADS["wordpress-admin"].cacheable == 0.0
    assert WORKLOADS["wordpress-admin"].headers == (("Cookie", login_cookie()),)


# real servers ------------------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("stack", [DB_STACK, "apache+mod_php+mariadb"])
def test_every_page_verifies_with_its_content(session, stack):
    """Both handlers: the anonymous pages (the mix holds them all) and the logged-in one
    with its cookie; without the cookie the dashboard sends to the login page."""
    for name in ("wordpress", "wordpress-admin"):
        d = deployed(session, name)
        with running(session, stack, d, php__apcu=True) as stack_run:
            verdicts = verify_stack(stack_run, d)
            assert_all_pass(verdicts)
            ep = stack_run.front.endpoint
            if name == "wordpress-admin":
                assert "stack:content /wp-admin/edit.php" in statuses(verdicts)
                # the compression figure is the logged-in page's, not the login redirect's
                admin = next(v for v in verdicts if v.check == f"content {ADMIN}")
                assert admin.data["encoded_bytes"] > 1000, admin.data
                anonymous = fetch(ep, ADMIN)
                assert anonymous.status == 302 and "wp-login.php" in anonymous.headers[
                    "location"]
                continue
            got = statuses(verdicts)
            assert {"stack:php errors", "mariadb:data", f"mariadb:queries {FRONT}"} <= set(got)
            front = fetch(ep, FRONT)
            assert f"{ep.host}:{ep.port}".encode() in front.body      # the site follows Host
            assert "cache-control" not in front.headers                # a visitor's page
            posts = json.loads(fetch(ep, REST).body)
            assert [p["id"] for p in posts] == [p.id for p in sorted(
                content(1).posts, key=lambda p: p.date, reverse=True)[:10]]


@pytest.mark.integration
def test_opcache_off_verifies(session):
    d = deployed(session, "wordpress-front")
    with running(session, DB_STACK, d, php__opcache=False) as stack_run:
        assert_all_pass(verify_stack(stack_run, d))


@pytest.mark.integration
def test_a_missing_table_fails_verification(session):
    """wp_options dropped in the running database (of its own seed: the datadir is the
    seeded one, kept for later runs): the pages and the data check FAIL."""
    d = deployed(session, "wordpress-front", seed=2)
    with running(session, DB_STACK, d) as stack_run:
        db = next(s for s in stack_run.started if s.name == "mariadb")
        query(db.endpoint.unix, "DROP TABLE stacklab_app.wp_options")
        verdicts = verify_stack(stack_run, d)
    got = statuses(verdicts)
    assert got[f"stack:content {FRONT}"] == "FAIL"
    assert got["mariadb:database"] == "FAIL"
    assert "wp_options" in next(v.detail for v in verdicts if v.check == "database")


@pytest.mark.integration
def test_a_php_fatal_error_fails_verification(session):
    """A must-use plugin calling a function that does not exist: every page a 500, and
    PHP's fatal error in the log beside the docroot."""
    d = deployed(session, "wordpress-front")
    broken = place(d.docroot, "/wp-content/mu-plugins/broken.php",
                   b"<?php stacklab_no_such_function();\n")
    try:
        with running(session, DB_STACK, d) as stack_run:
            verdicts = verify_stack(stack_run, d)
    finally:
        broken.unlink()
    got = statuses(verdicts)
    assert got[f"stack:content {FRONT}"] == "FAIL"
    php = next(v for v in verdicts if v.check == "php errors")
    assert php.status is Status.FAIL and "stacklab_no_such_function" in php.detail


@pytest.mark.integration
def test_varnish_never_serves_the_logged_in_page_from_cache(session):
    """Varnish told to cache every page whatever its headers say still passes a request
    with a Cookie: the logged-in page is never a hit; told to drop cookies, it cannot log
    in, and verification FAILs before any load."""
    d = deployed(session, "wordpress-admin")
    stack = f"varnish > {DB_STACK}"
    with running(session, stack, d, varnish__honour_cache_control=False) as stack_run:
        assert_all_pass(verify_stack(stack_run, d))
        ep = stack_run.front.endpoint
        for _ in range(3):
            resp = fetch(ep, ADMIN, {"Cookie": login_cookie()})
            assert resp.status == 200 and len(resp.headers["x-varnish"].split()) == 1
    with running(session, stack, d, varnish__honour_cookies=False) as stack_run:
        verdicts = verify_stack(stack_run, d)
    assert statuses(verdicts)[f"stack:content {ADMIN}"] == "FAIL"


def test_a_hit_on_the_logged_in_page_is_a_fail():
    """What the runner judges after the load: any hit on wordpress-admin (cacheable 0) is
    a FAIL under a Varnish that honours the backend's headers and cookies."""
    stack = f"varnish > {DB_STACK}"
    knobs = {name: REGISTRY.defaults(name) for name in STACKS[stack].components}
    figures = {"varnish": {"hits": 500, "misses": 500, "hit_ratio": 0.5}}
    [verdict] = layer_verdicts(STACKS[stack], figures, WORKLOADS["wordpress-admin"].cacheable,
                               knobs)
    assert verdict.status is Status.FAIL and "forbid" in verdict.detail


SPEC = """
[experiment]
name = "wordpress-short"
repetitions = 1
remeasure = 0
duration = "1s"
warmup = "0.3s"

[matrix]
stack = ["nginx+php-fpm+mariadb"]
workload = ["wordpress-post"]
concurrency = [2]
"""


@pytest.mark.integration
def test_a_short_run_measures_a_verified_page(tmp_path):
    require_engine()
    spec, db = tmp_path / "wp.toml", tmp_path / "r.db"
    spec.write_text(SPEC)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    outcome, verdicts = sqlite3.connect(db).execute(
        "SELECT outcome, verdicts_json FROM runs").fetchone()
    assert outcome == "ok"
    checks = {v["check"]: v["status"] for v in json.loads(verdicts)}
    assert checks[f"content /?p={POSTS[0]}"] == "PASS" and checks["php errors"] == "PASS"
    assert not server_processes()
