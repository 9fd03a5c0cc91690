"""The page view: the parser's subresources, the caching client's first and repeat view
against real Apache and nginx (expires off: every subresource revalidated; on: only the
page), bytes counted as sent, redirects kept on the page's origin, the per-trial summary
and S2's Expires check on stored runs."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rich.console import Console

from stacklab.analysis.analyze import load_view, summarize
from stacklab.run.pageview import PageViews, View, page_of, page_views, subresources
from stacklab.report.text import print_summary
from stacklab.experiment.plan import Trial, effective_knobs
from stacklab.run.stack import RunningStack, start_stack, stop_stack
from stacklab.stacks import REGISTRY, STACKS
from stacklab.stacks.tls import make_certificate
from stacklab.store import Outcome, RunRecord, Store
from stacklab.studies.plans import load_plan
from stacklab.studies.verdict import direction_verdict, measure_check
from stacklab.workloads import deploy
from stacklab.workloads.site import CSS_PATH, IMAGES, SCRIPTS, SITE_PATH

from fakes import fake_report, fake_resources

ASSETS = len(IMAGES) + len(SCRIPTS) + 1


# the parser ---------------------------------------------------------------------------

@pytest.mark.parametrize("html, urls", [
    ('<img src="/a.png"><img src="b.png"/>', ["/a.png", "b.png"]),
    ('<link rel="stylesheet" href="/s.css"><link rel="icon" href="/f.ico">', ["/s.css"]),
    ('<LINK REL="Alternate Stylesheet" HREF="/alt.css">', ["/alt.css"]),
    ('<script src="/x.js"></script><script>var y;</script>', ["/x.js"]),
    ('<img src="/a.png"><img src="/a.png">', ["/a.png"]),                  # fetched once
    ('<img src="data:image/png;base64,AAAA"><img src=""><img>', []),
    ('<a href="/next.html">next</a><iframe src="/f.html"></iframe>', []),   # not rendered
    ('<img src="http://example.com/x.png"><img src=" /y.png ">',
     ["http://example.com/x.png", "/y.png"]),
])
def test_the_subresources_a_browser_fetches_to_render(html, urls):
    assert subresources(html) == urls


def test_a_page_view_is_made_only_for_a_page_with_subresources_of_its_own(tmp_path):
    site = deploy("portal-site", tmp_path / "site")
    assert page_of(site.urls, site.docroot) == SITE_PATH
    assert page_of(((CSS_PATH, 1),), site.docroot) is None        # not a page
    lone = deploy("static-page", tmp_path / "static")
    assert page_of(lone.urls, lone.docroot) is None
    portal = deploy("portal-page", tmp_path / "portal")           # links a missing CSS
    assert page_of(portal.urls, portal.docroot) is None


# bytes and redirects against a server whose every byte is known -----------------------

BODY = b'<html><img src="/i.png"><script src="http://198.51.100.1/x.js"></script></html>'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sent: list[int] = []

    def do_GET(self):
        if self.path == "/moved":
            self._send(301, b"", [("Location", "/index.html")])
        elif self.path == "/away":
            self._send(302, b"", [("Location", "http://198.51.100.1/index.html")])
        elif self.path == "/index.html":
            self._send(200, BODY, [("Content-Type", "text/html")])
        else:
            self._send(200, b"\x89PNG" + bytes(96), [("Content-Type", "image/png")])

    def _send(self, status, body, headers):
        head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
        head += f"Content-Length: {len(body)}\r\n\r\n"
        self.wfile.write(head.encode() + body)
        self.sent.append(len(head) + len(body))

    def log_message(self, *args):
        pass


@contextmanager
def known_server():
    _Handler.sent = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_bytes_are_counted_as_sent_and_other_origins_are_never_asked():
    with known_server() as base:
        views = page_views(base, "/moved")
    # no validator, no lifetime: nothing is cached, both views fetch all again
    assert views.first == views.repeat == View(requests=3, bytes=sum(_Handler.sent) // 2)
    assert (views.subresources, views.offsite, views.error) == (1, 1, None)


def test_a_redirect_off_the_origin_is_not_followed():
    with known_server() as base:
        views = page_views(base, "/away")
    assert views.first.requests == 1 and views.first.failed == 1
    assert views.subresources == 0


def test_a_server_that_is_not_there_is_an_error_not_an_exception():
    with known_server() as base:
        pass
    views = page_views(base, "/index.html", timeout_s=1)
    assert views.error and views.first == View()


# real servers --------------------------------------------------------------------------

@contextmanager
def serving(session, stack: str, **knobs):
    """portal-site served by `stack` with `knobs` ({"apache.expires": "1d"})."""
    deployed = deploy("portal-site", session.docroot("portal-site"))
    running = RunningStack(STACKS[stack])
    trial = Trial(stack, "portal-site", 1, tuple(sorted(knobs.items())), ())
    try:
        start_stack(running, effective_knobs(REGISTRY, STACKS[stack], trial), deployed,
                    session.run_dir(f"pv-{stack}-{len(knobs)}"),
                    make_certificate(session.dir), session.cache())
        yield running.front.endpoint.base_url
    finally:
        assert stop_stack(running) == []


@pytest.mark.integration
@pytest.mark.parametrize("stack", ["apache", "nginx"])
def test_without_expires_the_repeat_view_revalidates_every_subresource(session, stack):
    with serving(session, stack) as base:
        views = page_views(base, SITE_PATH)
    assert views.error is None and views.subresources == ASSETS
    assert views.first.requests == 1 + ASSETS and views.first.revalidated == 0
    assert views.first.bytes > 126_000 + 200_000             # the page and its assets
    assert views.repeat.requests == views.repeat.revalidated == 1 + ASSETS
    assert views.repeat.bytes < 400 * (1 + ASSETS)           # 304s: headers only
    assert views.repeat.failed == 0


@pytest.mark.integration
@pytest.mark.parametrize("stack", ["apache", "nginx"])
def test_with_expires_the_repeat_view_asks_only_for_the_page(session, stack):
    with serving(session, stack, **{f"{stack}.expires": "1d"}) as base:
        views = page_views(base, SITE_PATH)
    assert views.first.requests == 1 + ASSETS
    assert views.repeat == View(requests=1, revalidated=1, bytes=views.repeat.bytes,
                                from_cache=ASSETS)
    assert 100 < views.repeat.bytes < 500


# the per-trial summary and S2's check on stored runs ----------------------------------

def _views(repeat_requests: int, repeat_bytes: int) -> dict:
    first = View(requests=13, bytes=360_000)
    repeat = View(requests=repeat_requests, revalidated=repeat_requests, bytes=repeat_bytes,
                  from_cache=13 - repeat_requests)
    return PageViews(SITE_PATH, 12, first, repeat).record()


def _run(exp: int, tid: str, rep: int, views: dict | None, outcome=Outcome.OK) -> RunRecord:
    resources = fake_resources("apache", 0.1, 10.0)
    if views:
        resources["_pageview"] = views
    return RunRecord(experiment_id=exp, trial_id=tid, repetition=rep, outcome=outcome,
                     started_at="t0", ended_at="t1", knobs={}, versions={"apache": "2.4"},
                     configs={}, load=fake_report(1000.0, 500.0, seed=rep),
                     resources=resources, flags=("host-busy",))


def test_the_trial_summary_has_each_views_requests_and_bytes():
    runs = [_run(1, "t", 1, _views(13, 3100)), _run(1, "t", 2, _views(13, 3300)),
            _run(1, "t", 3, {**_views(0, 0), "error": "ConnectionError: refused"}),
            _run(1, "t", 4, None)]
    s = summarize({"stack": "apache", "workload": "portal-site", "concurrency": 1,
                   "knobs": {}}, "apache", "t", runs)
    assert s.page_views["repeat_bytes"].values == (3100, 3300)
    assert s.page_views["first_requests"].median == 13
    assert summarize({"stack": "apache", "workload": "static-page", "concurrency": 1,
                      "knobs": {}}, "x", "x", [_run(1, "x", 1, None)]).page_views == {}


def stored_expires_runs(tmp_path):
    """S2's Expires step as stored: expires off and 1d, three runs each, host-busy."""
    store = Store.open(tmp_path / "r.db")
    trials = [(f"t-{v}", f"apache portal-site expires={v}",
               {"stack": "apache", "workload": "portal-site", "concurrency": 10,
                "knobs": {"apache.expires": v}}) for v in ("off", "1d")]
    exp = store.new_experiment("study-s2-expires", "s2.toml", "h", {"experiment": {}},
                               trials, {}, "0.1.0", None, "2026-01-01T00:00:00")
    for rep in (1, 2, 3):
        store.add_run(_run(exp, "t-off", rep, _views(13, 3120 + rep)))
        store.add_run(_run(exp, "t-1d", rep, _views(1, 240 + rep)))
    view = load_view(store, exp)
    store.close()
    return view


def test_s2s_expires_check_measures_repeat_bytes_on_stored_runs(tmp_path):
    [check] = [c for s in load_plan("S2").steps for c in s.checks
               if c.finding == "expires-headers"]
    assert check.metric == "repeat_bytes"
    m = measure_check(check, stored_expires_runs(tmp_path), REGISTRY)
    assert m.comparison.ratio == pytest.approx(241.0 / 3121, rel=0.01)
    assert m.bound is None                       # host-busy does not bound a size
    assert direction_verdict("b<a", m) == "holds"


def test_show_lists_each_trials_page_views(tmp_path):
    console = Console(record=True, width=300)
    print_summary(stored_expires_runs(tmp_path), console)
    lines = [line for line in console.export_text().splitlines() if "page views" in line]
    assert len(lines) == 2
    assert lines[1].endswith("(a client with a cache, 3 runs): first view 13 requests, "
                             "360,000 B; repeat view 1 request, 242 B")
