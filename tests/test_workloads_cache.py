"""Workloads for a cache in front: the share of each load a shared cache may store
(Workload.cacheable) is what its pages' real headers say, under real PHP."""

import os
import subprocess
from dataclasses import replace

import pytest

from stacklab.run.stack import verify_stack
from stacklab.measure.verify import fetch
from stacklab.workloads import WORKLOADS, Workload, app, canonical, deploy, pages
from stacklab.workloads.appdata import AppDatabase

from test_stacks import assert_all_pass
from test_workloads import deploy_together, running
from helpers import shared_session

NO_STORE = "no-store, no-cache, must-revalidate"   # session.cache_limiter = nocache


def storable(headers: dict[str, str]) -> bool:
    """Whether a shared cache may store a response by its own headers alone (RFC 9111 §3,
    §4.2.1): no no-store, private or no-cache, no Set-Cookie (Varnish's and nginx's default
    rules refuse it), and an explicit lifetime (max-age or s-maxage above 0). A response
    with none of these is left to each cache's heuristics: not storable here."""
    directives = {}
    for part in headers.get("cache-control", "").split(","):
        name, _, value = part.strip().lower().partition("=")
        directives[name] = value
    if {"no-store", "private", "no-cache"} & directives.keys() or "set-cookie" in headers:
        return False
    return any(directives.get(d, "0").isdigit() and int(directives.get(d, "0")) > 0
               for d in ("s-maxage", "max-age"))


def share(name: str, headers: dict[str, dict[str, str]]) -> float:
    """The request weight of `name`'s URLs whose responses are storable."""
    urls = WORKLOADS[name].urls
    return sum(w for path, w in urls if storable(headers[path])) / sum(w for _, w in urls)


# --- declarations, without a server -----------------------------------------------------

@pytest.mark.parametrize("name, share_", [
    ("php-cacheable", 1.0), ("php-uncacheable", 0.0), ("php-session", 0.0),
    ("php-cache-mix", 0.5), ("php-cache-mix:90", 0.9), ("php-cache-mix:0", 0.0),
    ("app-show-cacheable", 1.0), ("app-tree-cacheable", 1.0),
    # No caching header at all: each cache's own rules decide (see WORKLOADS).
    ("static-page", None), ("php-index", None), ("app-show", None), ("app-mix", None),
])
def test_each_workload_declares_what_a_cache_may_store(name, share_):
    assert WORKLOADS[name].cacheable == share_


@pytest.mark.parametrize("name, urls", [
    ("php-cache-mix", (("/cacheable.php", 50), ("/uncacheable.php", 50))),
    ("php-cache-mix:50", (("/cacheable.php", 50), ("/uncacheable.php", 50))),
    ("php-cache-mix:25", (("/cacheable.php", 25), ("/uncacheable.php", 75))),
    ("php-cache-mix:100", (("/cacheable.php", 100),)),      # no URL of weight 0
    ("php-cache-mix:0", (("/uncacheable.php", 100),)),
])
def test_the_mix_puts_its_percent_of_the_weight_on_the_cacheable_page(name, urls):
    workload = WORKLOADS[name]
    assert workload.urls == urls
    weight = dict(urls)
    assert workload.cacheable == weight.get("/cacheable.php", 0) / sum(weight.values())


def test_the_mix_percent_has_one_spelling_and_a_range():
    assert canonical("php-cache-mix:50") == "php-cache-mix"
    assert canonical("php-cache-mix:075") == "php-cache-mix:75"
    assert "php-cache-mix:101" not in WORKLOADS and "php-cache-mix:-1" not in WORKLOADS
    assert "php-uncacheable:5" not in WORKLOADS
    assert "php-cache-mix:N sets the percent of requests to the cacheable page (0..100" in (
        WORKLOADS["php-cache-mix"].description)


def test_a_share_outside_0_to_1_is_refused():
    with pytest.raises(ValueError, match="cacheable is a share 0..1, not 1.5"):
        Workload("w", "", lambda seed: [], (("/", 1),), cacheable=1.5)


def test_existing_workloads_keep_their_names_and_urls():
    """Their trials' ids are made of these: a cacheable variant is a new name."""
    assert WORKLOADS["php-cacheable"].urls == (("/cacheable.php", 1),)
    assert {n: WORKLOADS[n].urls for n in ("app-show", "app-tree")} == {
        "app-show": (("/showArticle.php?show=1", 1),),
        "app-tree": (("/showArticle.php?tree=1", 1),)}
    assert WORKLOADS["app-mix"].urls == app.URLS and len(app.URLS) == 4


def test_deployed_carries_the_share_and_checks_only_its_urls(tmp_path):
    mix = deploy("php-cache-mix:90", tmp_path / "m")
    assert (mix.cacheable, set(mix.expected)) == (0.9, {"/cacheable.php", "/uncacheable.php"})
    none = deploy("php-cache-mix:0", tmp_path / "n")
    assert (none.cacheable, set(none.expected)) == (0.0, {"/uncacheable.php"})
    assert deploy("static-page", tmp_path / "s").cacheable is None
    shown = deploy("app-show-cacheable", tmp_path / "a")
    assert (shown.cacheable, set(shown.expected)) == (1.0, {app.SHOW_CACHEABLE})
    assert shown.expected[app.SHOW_CACHEABLE].contains == app.marker("show")


def test_both_pages_serve_the_same_body_file(tmp_path):
    deploy("php-cache-mix", tmp_path / "d")
    for script in ("cacheable.php", "uncacheable.php"):
        assert b"__DIR__ . '/cacheable.html'" in (tmp_path / "d" / script).read_bytes()
    assert pages.CACHEABLE_MARKER in (tmp_path / "d/cacheable.html").read_bytes()


def cgi(script, query: str) -> tuple[dict[str, str], bytes]:
    """One GET of `script` under php-cgi (no php.ini: no mysqli): its headers and body."""
    env = {"GATEWAY_INTERFACE": "CGI/1.1", "REQUEST_METHOD": "GET", "REDIRECT_STATUS": "200",
           "SCRIPT_FILENAME": str(script), "QUERY_STRING": query, "PATH": os.environ["PATH"]}
    out = subprocess.run(["php-cgi", "-n"], env=env, capture_output=True, check=True,
                         timeout=30).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    return {k.strip().lower(): v.strip() for k, _, v in
            (line.partition(":") for line in head.decode().split("\r\n"))}, body


def test_the_application_sends_cache_control_only_when_asked_and_only_on_success(tmp_path):
    """lib.php's sl_finish under real PHP: &cache=1 makes a page storable; a page that
    fails (here: no mysqli) is never."""
    deploy("app-show-cacheable", tmp_path / "d")
    page = tmp_path / "d" / "finish.php"
    page.write_text("<?php require __DIR__ . '/lib.php'; echo 'page'; sl_finish();\n")
    asked, body = cgi(page, "show=1&cache=1")
    assert asked["cache-control"] == "public, max-age=300" and body == b"page"
    assert storable(asked)
    plain, _ = cgi(page, "show=1")
    assert "cache-control" not in plain and "server-timing" in plain
    failed, body = cgi(tmp_path / "d" / "showArticle.php", "show=1&cache=1")
    assert failed["status"].startswith("500") and b"mysqli" in body
    assert "cache-control" not in failed


# --- real nginx + PHP-FPM (and MariaDB) on loopback ------------------------------------

session = shared_session()


@pytest.mark.integration
def test_php_pages_send_the_headers_their_shares_say(session):
    names = ["php-cacheable", "php-uncacheable", "php-cache-mix", "php-cache-mix:90",
             "php-session"]
    deployed = deploy_together(names, session.run_dir("docroot-cache-pages"))
    with running(session, "nginx+php-fpm", deployed) as stack:
        assert_all_pass(verify_stack(stack, deployed))
        ep = stack.front.endpoint
        got = {path: fetch(ep, path) for path in ("/cacheable.php", "/uncacheable.php",
                                                  "/session.php")}
        headers = {path: r.headers for path, r in got.items()}
        assert {n: share(n, headers) for n in names} == {
            n: WORKLOADS[n].cacheable for n in names}

        cacheable, uncacheable = got["/cacheable.php"], got["/uncacheable.php"]
        assert cacheable.body == uncacheable.body == (
            deployed.docroot / "cacheable.html").read_bytes()
        assert cacheable.headers["cache-control"] == "public, max-age=300"
        assert "pragma" not in cacheable.headers and "expires" not in cacheable.headers
        assert uncacheable.headers["cache-control"] == NO_STORE
        assert uncacheable.headers["pragma"] == "no-cache"
        assert uncacheable.headers["expires"] == "Thu, 19 Nov 1981 08:52:00 GMT"
        assert "etag" not in uncacheable.headers and "last-modified" not in uncacheable.headers
        etag = cacheable.headers["etag"]
        assert fetch(ep, "/cacheable.php", {"If-None-Match": etag}).status == 304
        again = fetch(ep, "/uncacheable.php", {"If-None-Match": etag})
        assert (again.status, again.body) == (200, uncacheable.body)


@pytest.mark.integration
def test_application_pages_are_cacheable_only_with_cache_1(session):
    names = ["app-show", "app-tree", "app-show-cacheable", "app-tree-cacheable"]
    deployed = deploy_together(names, session.run_dir("docroot-cache-app"))
    deployed = replace(deployed, database=AppDatabase(5, articles=1000))
    with running(session, "nginx+php-fpm+mariadb", deployed) as stack:
        assert_all_pass(verify_stack(stack, deployed))
        ep = stack.front.endpoint
        got = {path: fetch(ep, path) for name in names for path, _ in WORKLOADS[name].urls}
        assert {n: share(n, {p: r.headers for p, r in got.items()}) for n in names[2:]} == {
            n: 1.0 for n in names[2:]}
        for plain, cached in (("/showArticle.php?show=1", app.SHOW_CACHEABLE),
                              ("/showArticle.php?tree=1", app.TREE_CACHEABLE)):
            assert got[cached].headers["cache-control"] == "public, max-age=300"
            assert not {"cache-control", "expires", "last-modified", "etag", "pragma"} & set(
                got[plain].headers)           # nothing said: a cache's own rules decide
            assert got[cached].body == got[plain].body         # the same page
