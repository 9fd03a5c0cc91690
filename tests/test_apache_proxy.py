"""apache-proxy in front of real nginx backends: it answers, verify() is all PASS, its
counters move as they should, a cache serves hits and never an uncacheable response, a
balancer spreads; stopped, nothing of either is left. Its rendered config quotes paths
and passes apache2 -t; check() refuses what cannot run."""

import contextlib
import os
import pwd
import subprocess

import pytest

from stacklab.host import lab, procs
from stacklab.errors import StackError
from stacklab.stacks import COMPONENTS, REGISTRY
from stacklab.stacks.apache_proxy import ApacheProxy
from stacklab.stacks.apache_proxy.knobs import KNOBS
from stacklab.stacks.base import RenderContext, free_port
from stacklab.stacks.tls import make_certificate
from stacklab.host.net import Endpoint
from stacklab.measure.verify import Status, fetch
from stacklab.workloads import deploy

from helpers import tamper, wait_for
from test_stacks import run_stack

pytestmark = pytest.mark.integration

PROXY = ApacheProxy()
NGINX = COMPONENTS["nginx"]
# Pages the backends serve with what makes a response uncacheable.
UNCACHEABLE = {"/nostore.html": 'add_header Cache-Control "no-store";',
               "/private.html": 'add_header Cache-Control "private";',
               "/cookie.html": 'add_header Set-Cookie "session=1";'}


def proxy_knobs(**overrides):
    return {k.name: k.default for k in KNOBS} | overrides


def context(session, name, docroot, backends=(), tls=(None, None)):
    user, group = lab.server_user()
    return RenderContext(session.run_dir(name), docroot, "127.0.0.1", free_port(), user,
                         group, tls_cert=tls[0], tls_key=tls[1], backends=backends)


@pytest.fixture
def docroot(session):
    deployed = deploy("static-page", session.run_dir("docroot"))
    for path in UNCACHEABLE:
        (deployed.docroot / path.lstrip("/")).write_text(f"<p>{path}</p>\n")
    return deployed.docroot


@contextlib.contextmanager
def running(session, docroot, monkeypatch, n_backends=1, nginx_knobs=None, **knobs):
    """n nginx backends (serving UNCACHEABLE's pages with their headers) and the proxy in
    front; yields (proxy, backends); stops all and asserts no process of any is left."""
    extra = "".join(f"location = {path} {{ {header} }}\n        "
                    for path, header in UNCACHEABLE.items())
    tamper(monkeypatch, "nginx", "nginx.conf", r"(location = /_stacklab/nginx-status)",
           extra + r"\1")
    started, pgids = [], []
    try:
        for i in range(n_backends):
            ctx = context(session, f"nginx-{i}", docroot)
            started.append((NGINX, NGINX.start(ctx, REGISTRY.defaults("nginx")
                                                | (nginx_knobs or {}))))
        backends = tuple(s.endpoint for _, s in started)
        ctx = context(session, "apache-proxy", docroot, backends)
        started.append((PROXY, PROXY.start(ctx, proxy_knobs(**knobs))))
        pgids = [s.proc.pgid for _, s in started]
        if ctx.user:       # as root: the children dropped to the server user
            assert children_uids(started[-1][1]) == {pwd.getpwnam(ctx.user).pw_uid}
        yield started[-1][1], [s for _, s in started[:-1]]
    finally:
        for component, s in reversed(started):
            component.stop(s)
    assert all(procs.group_members(pgid) == [] for pgid in pgids)


def children_uids(started):
    pids = set(procs.group_members(started.proc.pgid)) - {started.proc.pgid}
    assert pids
    return {os.stat(f"/proc/{pid}").st_uid for pid in pids}


def assert_all_pass(verdicts):
    bad = [v for v in verdicts if v.status is not Status.PASS]
    assert not bad, bad


def verdict(verdicts, check):
    return next(v for v in verdicts if v.check == check)


def get_twice(proxy, path):
    return [fetch(proxy.endpoint, path) for _ in range(2)]


def is_hit(resp):
    return resp.headers.get("x-cache", "").startswith("HIT")


def fetch_until_hit(proxy, path):
    """GETs until one is a HIT (mod_cache may commit what it stored just after the client
    has it whole): all the responses."""
    responses = []
    wait_for(lambda: responses.append(fetch(proxy.endpoint, path)) or is_hit(responses[-1]),
             10, f"{path} served from the cache")
    return responses


def accesses_counted(proxy, before, requests):
    """Wait until mod_status's Total Accesses counts `requests` more since `before`, and
    the status readings (each counts the ones before it, `before` included): exactly."""
    readings = 0

    def exact():
        nonlocal readings
        readings += 1
        return PROXY.counters(proxy)["requests"] - before["requests"] == requests + readings
    wait_for(exact, 10, f"Total Accesses +{requests} and the status readings")


def counted(proxy, before, requests):
    """The proxy's counters once `requests` more are counted as hits or misses (Apache
    logs a request just after answering it)."""
    def moved():
        now = PROXY.counters(proxy)
        done = sum(now[n] - before[n] for n in ("cache_hits", "cache_misses")) >= requests
        return now if done else None
    return wait_for(moved, 10, f"{requests} requests counted as hits or misses")


@pytest.mark.parametrize("cache", ["disk", "socache"])
def test_a_cache_serves_hits_and_never_an_uncacheable_response(session, docroot,
                                                               monkeypatch, cache):
    with running(session, docroot, monkeypatch, cache=cache) as (proxy, [backend]):
        verdicts = PROXY.verify(proxy, proxy)
        assert_all_pass(verdicts)
        seen = verdict(verdicts, "cache").data["x_cache"]
        assert seen[0].startswith("MISS") and seen[-1].startswith("HIT")  # a cold start
        before, nginx_before = PROXY.counters(proxy), NGINX.counters(backend)["requests"]
        page = fetch_until_hit(proxy, "/index.html")      # the workload's own page
        assert page[0].headers["x-cache"].startswith("MISS") and page[-1].body == page[0].body
        for path in UNCACHEABLE:
            responses = get_twice(proxy, path)
            assert [r.status for r in responses] == [200, 200]
            assert not any(map(is_hit, responses)), (path, [r.headers for r in responses])
            if "Set-Cookie" in UNCACHEABLE[path]:     # passed on to each, not stored
                assert [r.headers["set-cookie"] for r in responses] == ["session=1"] * 2
        after = counted(proxy, before, len(page) + 2 * len(UNCACHEABLE))
        nginx_moved = NGINX.counters(backend)["requests"] - nginx_before - 1  # its reading
    passed = len(page) - 1 + 2 * len(UNCACHEABLE)
    assert after["cache_hits"] - before["cache_hits"] == 1
    assert after["cache_misses"] - before["cache_misses"] == passed
    assert after["backend:0"] - before["backend:0"] == nginx_moved == passed


def test_pass_through_never_hits_and_counts_every_request(session, docroot, monkeypatch):
    with running(session, docroot, monkeypatch, cache="none", keepalive=False,
                 threads_per_child=8, max_request_workers=16) as (proxy, [backend]):
        verdicts = PROXY.verify(proxy, proxy)
        before = PROXY.counters(proxy)
        responses = [fetch(proxy.endpoint, "/index.html") for _ in range(3)]
        accesses_counted(proxy, before, 3)
        after = counted(proxy, before, 3)
        own = fetch(proxy.endpoint, "/_stacklab/nginx-status")   # the backend's, passed
    assert_all_pass(verdicts)
    assert "closed the connection" in verdict(verdicts, "keep-alive").detail
    assert verdict(verdicts, "cache").data["x_cache"] == [None, None]
    assert all(r.status == 200 and "x-cache" not in r.headers for r in responses)
    assert after["cache_hits"] == 0
    assert after["cache_misses"] - before["cache_misses"] == 3
    assert own.status == 200 and b"Active connections" in own.body


def test_a_balancer_spreads_by_weight_over_three_backends(session, docroot, monkeypatch):
    with running(session, docroot, monkeypatch, 3, weights="1,2,1",
                 backend_keepalive=False, cache="disk") as (proxy, backends):
        nginx_before = [NGINX.counters(b)["requests"] for b in backends]
        before = PROXY.counters(proxy)
        verdicts = PROXY.verify(proxy, proxy)
        nginx_moved = [NGINX.counters(b)["requests"] - n - 1      # less its own reading
                       for b, n in zip(backends, nginx_before)]
        after = counted(proxy, before, sum(nginx_moved))
    assert_all_pass(verdicts)
    spread = verdict(verdicts, "spread")
    assert spread.data["got"] == [20, 40, 20], spread
    assert verdict(verdicts, "backend reuse").data["open_connections"] == 0
    moved = [after[f"backend:{i}"] - before[f"backend:{i}"] for i in range(3)]
    assert moved == nginx_moved      # what the proxy says it sent, each backend answered
    asked = {line.split('"')[1] for b in backends
             for line in (b.ctx.run_dir / "access.log").read_text().splitlines()}
    assert "GET /_stacklab/check.html HTTP/1.1" in asked    # the path as the client sent it
    assert not any(request.startswith("GET //") for request in asked), asked
    assert sum(moved) == after["cache_misses"] - before["cache_misses"]


def test_composed_in_front_of_two_replicas_it_starts_verifies_and_stops(session,
                                                                      monkeypatch):
    """Through the lab's own composition ('apache-proxy > nginx * 2'), registered here
    as the registry line will: every verdict of the stack PASSes, itself included."""
    monkeypatch.setitem(COMPONENTS, "apache-proxy", PROXY)
    for knob in KNOBS:
        monkeypatch.setitem(REGISTRY.knobs, knob.key, knob)
    verdicts = run_stack(session, "apache-proxy > nginx * 2", **{
        "apache-proxy__cache": "socache", "apache-proxy__weights": "1,3"})
    assert_all_pass(verdicts)
    assert verdict(verdicts, "spread").data["got"] == [20, 60]
    assert PROXY.shares(proxy_knobs(weights="1,3"), 2) == [0.25, 0.75]
    assert PROXY.shares(proxy_knobs(lbmethod="bybusyness"), 2) is None


@pytest.mark.parametrize("backends, knobs, pattern, replacement, check, detail", [
    (1, {}, r"retry=0$", "retry=0 disablereuse=On", "backend reuse",
     ("0 connection(s) to the backends open after passing requests with "
      "backend_keepalive on", "")),
    (1, {"cache": "disk"}, r"^CacheEnable disk .*$", "", "cache",
     ("cache disk: /_apache-proxy-verify 5 times: X-Cache None, None, None, None, None; "
      "counters hits +0, misses +5; expected a HIT, counted as X-Cache said", "")),
    (1, {"cache": "socache"}, r'^CacheDisable "/_stacklab/"$', "", "/_stacklab/ passed",
     ("/_stacklab/check.html twice: statuses [200, 200], X-Cache ['MISS from localhost', ",
      "; expected two passes")),      # the second a HIT, or a MISS if not yet stored
    (2, {"weights": "1,3"}, r"loadfactor=3", "loadfactor=1", "spread",
     ("80 requests: backends got [40, 40] (within ±10% of [20, 60]): not spread as the "
      "weights say", "")),
])
def test_verify_fails_on_a_config_that_is_not_the_knobs(session, docroot, monkeypatch,
                                                         backends, knobs, pattern,
                                                         replacement, check, detail):
    """Each check FAILs, saying what it saw, when the running config does not do what
    the knobs claim."""
    monkeypatch.setitem(COMPONENTS, "apache-proxy", PROXY)    # until it is registered
    tamper(monkeypatch, "apache-proxy", "httpd.conf", pattern, replacement)
    with running(session, docroot, monkeypatch, backends, **knobs) as (proxy, _):
        failed = verdict(PROXY.verify(proxy, proxy), check)
    assert failed.status is Status.FAIL, failed
    starts, ends = detail
    assert failed.detail.startswith(starts) and failed.detail.endswith(ends), failed.detail


def test_reuse_is_a_warning_when_the_backends_close_connections(session, docroot,
                                                                 monkeypatch):
    with running(session, docroot, monkeypatch, nginx_knobs={"keepalive_timeout": 0}) \
            as (proxy, _):
        reuse = verdict(PROXY.verify(proxy, proxy), "backend reuse")
    assert reuse.status is Status.WARN, reuse
    assert reuse.data == {"reuse": True, "open_connections": 0}
    assert "closes every connection itself" in reuse.detail


def test_an_https_backend_is_proxied(session, docroot):
    tls = make_certificate(session.dir)
    backend = NGINX.start(context(session, "nginx-tls", docroot, tls=tls),
                          REGISTRY.defaults("nginx") | {"tls": True})
    try:
        proxy = PROXY.start(context(session, "proxy-tls", docroot, (backend.endpoint,)),
                            proxy_knobs())
        try:
            resp = fetch(proxy.endpoint, "/index.html")
            passed = wait_for(lambda: PROXY.counters(proxy)["backend:0"], 10,
                              "the request counted as passed to the backend")
        finally:
            PROXY.stop(proxy)
    finally:
        NGINX.stop(backend)
    assert backend.endpoint.scheme == "https" and "SSLProxyEngine On" in proxy.files[
        "httpd.conf"]
    assert resp.status == 200 and passed == 1
    assert procs.group_members(proxy.proc.pgid) == procs.group_members(backend.proc.pgid) == []


@pytest.mark.parametrize("cache, backends", [("disk", 1), ("socache", 2), ("none", 3)])
def test_rendered_config_quotes_paths_and_passes_apache2_t(session, cache, backends):
    """Every path quoted (a run directory with spaces and a double quote), a backend on
    a unix socket among them; Apache's own config test accepts the result."""
    run_dir = session.run_dir('a "lab" dir') / cache
    run_dir.mkdir()
    sock = run_dir / "front.sock"
    eps = (*(Endpoint("127.0.0.1", 8000 + i) for i in range(backends - 1)),
           Endpoint("127.0.0.1", 0, unix=sock))
    user, group = lab.server_user()
    ctx = RenderContext(run_dir, run_dir, "127.0.0.1", 8080, user, group, backends=eps)
    text = PROXY.render(ctx, proxy_knobs(cache=cache, weights=",".join("3" * backends)))
    conf = text["httpd.conf"]
    (run_dir / "httpd.conf").write_text(conf)
    quoted = str(run_dir).replace('"', '\\"')
    assert f'ErrorLog "{quoted}/error.log"' in conf
    assert f'"unix:{quoted}/front.sock|http://localhost' in conf
    assert {"disk": f'CacheRoot "{quoted}/cache"',
            "socache": f'CacheSocache "shmcb:{quoted}/cache.shmcb(512000)"',
            "none": "ProxySet lbmethod=byrequests"}[cache] in conf
    assert (f'CacheLockPath "{quoted}/cache-lock"' in conf) == (cache != "none")
    result = subprocess.run([*PROXY.command(ctx, {}), "-t"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr


def test_weights_must_match_the_backends(tmp_path):
    ctx = RenderContext(tmp_path, tmp_path, "127.0.0.1", 8080, None, None,
                        backends=(Endpoint("127.0.0.1", 8001), Endpoint("127.0.0.1", 8002)))
    with pytest.raises(StackError, match=r"apache-proxy.weights = '1,2,1' gives 3 "
                                         r"loadfactors for 2 backends"):
        PROXY.render(ctx, proxy_knobs(weights="1,2,1"))
    with pytest.raises(StackError, match="needs at least one backend"):
        PROXY.render(RenderContext(tmp_path, tmp_path, "127.0.0.1", 8080, None, None),
                     proxy_knobs())


@pytest.mark.parametrize("knobs, problem", [
    ({"weights": "1,x"}, "apache-proxy.weights: '1,x' is not comma-separated loadfactors "
                         "from 1 to 100, one per backend"),
    ({"weights": "1,,2"}, "apache-proxy.weights: '1,,2' is not"),
    ({"weights": "0,1"}, "apache-proxy.weights: '0,1' is not"),
    ({"weights": "101"}, "apache-proxy.weights: '101' is not"),
    ({"weights": " 1"}, "apache-proxy.weights: ' 1' is not"),
    ({"max_request_workers": 10}, "apache-proxy.max_request_workers (10) is below "
                                  "apache-proxy.threads_per_child (25)"),
    ({"weights": "1,100", "max_request_workers": 25}, None),
])
def test_check_refuses_what_cannot_run(knobs, problem):
    got = PROXY.check(proxy_knobs(**knobs))
    assert got == problem if problem is None else got.startswith(problem), got
