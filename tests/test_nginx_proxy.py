"""nginx-proxy in front of real backends (nginx, nginx+php-fpm) on loopback: it caches
what it may and passes what it must, by X-Cache-Status and by its counters; it serves
files itself with static=files; it spreads over replicas as the weights say; verify()
passes; its config quotes paths and check() refuses what cannot run; stop leaves no
process of either group."""

import contextlib
import os
import pwd
import re
import subprocess

import pytest

from stacklab.host import lab, procs
from stacklab.errors import StackError
from stacklab.host.net import Endpoint
from stacklab.run.stack import RunningStack, start_stack, stop_stack
from stacklab.stacks import COMPONENTS, REGISTRY, STACKS
from stacklab.stacks.base import RenderContext, free_port
from stacklab.stacks.nginx_proxy import NginxProxy
from stacklab.stacks.nginx_proxy.knobs import KNOBS
from stacklab.stacks.tls import make_certificate
from stacklab.measure.verify import CHECK_PATH, Status, fetch
from stacklab.workloads import deploy

from helpers import wait_for
from test_stacks import knobs_for

pytestmark = pytest.mark.integration

PROXY = NginxProxy()
NGINX = COMPONENTS["nginx"]
DEFAULTS = {k.name: k.default for k in KNOBS}
NO_STORE = b"<?php header('Cache-Control: no-store'); echo 'fresh ', microtime(true);\n"


@contextlib.contextmanager
def proxied(session, backends, docroot, **knobs):
    """nginx-proxy (its defaults, `knobs`) in front of `backends` (running components);
    stopped afterwards with no process of its group left."""
    ctx = RenderContext(session.run_dir("proxy"), docroot, "127.0.0.1", free_port(),
                        *lab.server_user(), backends=tuple(b.endpoint for b in backends))
    proxy = PROXY.start(ctx, DEFAULTS | knobs)
    try:
        yield proxy
    finally:
        PROXY.stop(proxy)
    assert procs.group_members(proxy.proc.pgid) == []


@contextlib.contextmanager
def nginx_backends(session, docroot, replicas, **knobs):
    """`replicas` nginx servers (their defaults, `knobs`) serving `docroot`."""
    started = []
    try:
        for i in range(replicas):
            ctx = RenderContext(session.run_dir(f"nginx-{i}"), docroot, "127.0.0.1",
                                free_port(), *lab.server_user())
            started.append(NGINX.start(ctx, REGISTRY.defaults("nginx") | knobs))
        yield started
    finally:
        for s in started:
            NGINX.stop(s)
    assert all(procs.group_members(s.proc.pgid) == [] for s in started)


def settled(proxy, before, logged):
    """The counters' change once `logged` more requests reached the upstream log (nginx
    logs a request after answering it)."""
    def delta():
        now = PROXY.counters(proxy)
        change = {name: now[name] - before[name] for name in now}
        counted = sum(v for k, v in change.items() if k.startswith("backend:")) + \
            change.get("cache_hits", 0)
        return change if counted >= logged else None
    return wait_for(delta, 5, f"the upstream log holds {logged} more requests")


def test_cache_hits_passes_stacklab_and_counts(session):
    deployed = deploy("static-page", session.run_dir("docroot"))
    with nginx_backends(session, deployed.docroot, 1) as [nginx], \
            proxied(session, [nginx], deployed.docroot, cache=True) as proxy:
        verdicts = PROXY.verify(proxy, proxy)
        members = procs.group_members(proxy.proc.pgid)
        users = {os.stat(f"/proc/{p}").st_uid for p in members if p != proxy.proc.pgid}
        before, served = PROXY.counters(proxy), NGINX.counters(nginx)["requests"]
        pages = [fetch(proxy.endpoint, "/index.html") for _ in range(3)]
        probes = [fetch(proxy.endpoint, CHECK_PATH) for _ in range(2)]
        delta = settled(proxy, before, 5)
        served = NGINX.counters(nginx)["requests"] - served - 1   # the reading itself
    assert [(v.check, v.status) for v in verdicts] == [
        ("stacklab paths passed", Status.PASS), ("backend counted", Status.PASS),
        ("keep-alive", Status.PASS), ("cache", Status.PASS)]
    assert verdicts[3].detail == ("/index.html twice: X-Cache-Status MISS, then HIT; "
                                  "counters +1 hits +1 misses")
    assert [r.status for r in pages + probes] == [200] * 5
    assert pages[0].body == (deployed.docroot / "index.html").read_bytes()
    # verify cached the page: three hits; the probes passed, never marked
    assert [r.headers.get("x-cache-status") for r in pages + probes] == ["HIT"] * 3 + [None] * 2
    assert (delta["cache_hits"], delta["cache_misses"], delta["backend:0"]) == (3, 0, 2)
    assert served == 2           # the backend saw the probes only, as the proxy counted
    assert len(members) == 4     # master, worker, cache manager and loader
    if os.getuid() == 0:
        assert users == {pwd.getpwnam(lab.server_user()[0]).pw_uid} != {0}


@pytest.mark.parametrize("balance, keepalive, tolerance",
                         [("round_robin", 0, "±10%"),
                          ("least_conn", 16, "±20%, or towards an even spread: least_conn")])
def test_spreads_over_three_replicas_as_weighted(session, balance, keepalive, tolerance):
    """(The second without the access log: the counters' own log is still written.)"""
    deployed = deploy("static-page", session.run_dir("docroot"))
    with nginx_backends(session, deployed.docroot, 3) as backends, \
            proxied(session, backends, deployed.docroot, balance=balance, weights="1,2,1",
                    upstream_keepalive=keepalive, worker_processes=2,
                    access_log=not keepalive) as proxy:
        verdicts = {v.check: v for v in PROXY.verify(proxy, proxy)}
        before = PROXY.counters(proxy)
        seen = [NGINX.counters(b) for b in backends]
        pages = [fetch(proxy.endpoint, "/index.html") for _ in range(40)]
        delta = settled(proxy, before, 40)
        after = [NGINX.counters(b) for b in backends]
        logs = sorted(p.name for p in proxy.ctx.run_dir.glob("*.log"))
    assert logs == ["error.log", "upstream.log"] if keepalive else \
        ["access.log", "error.log", "upstream.log"]
    assert {v.status for v in verdicts.values()} == {Status.PASS}, \
        [(v.check, v.detail) for v in verdicts.values() if v.status is not Status.PASS]
    assert set(verdicts) == {"stacklab paths passed", "spread", "keep-alive", "pass-through"}
    assert verdicts["spread"].detail.startswith("80 requests: backends got ")
    assert verdicts["spread"].detail.endswith(f"for weights 1, 2, 1 ({tolerance})")
    assert all(r.status == 200 and "x-cache-status" not in r.headers for r in pages)
    sent = [delta[f"backend:{i}"] for i in range(3)]
    requests = [a["requests"] - s["requests"] - 1 for s, a in zip(seen, after)]
    accepts = [a["accepts"] - s["accepts"] - 1 for s, a in zip(seen, after)]
    assert requests == sent and sum(sent) == 40   # each nginx counted what the proxy sent
    if balance == "round_robin":
        assert sent == [10, 20, 10]
    if keepalive:     # requests over kept connections: fewer accepted than served
        assert sum(accepts) <= 2 * 3 < sum(requests)
    else:
        assert accepts == requests


def test_static_files_here_scripts_cached_or_passed_by_their_headers(session):
    """static=files in front of nginx+php-fpm: a file is answered by the proxy, the
    cacheable script is a hit the second time, a no-store one never is."""
    deployed = deploy("php-cacheable", session.run_dir("docroot"))
    (deployed.docroot / "nostore.php").write_bytes(NO_STORE)
    running = RunningStack(STACKS["nginx+php-fpm"])
    try:
        start_stack(running, knobs_for("nginx+php-fpm"), deployed, session.run_dir("stack"),
                    make_certificate(session.dir))
        backend = running.front
        with proxied(session, [backend], deployed.docroot, static="files", cache=True,
                     cache_lock=True, keepalive_timeout=0) as proxy:
            verdicts = {v.check: v for v in PROXY.verify(proxy, proxy)}
            served = NGINX.counters(backend)["requests"]
            before = PROXY.counters(proxy)
            page = fetch(proxy.endpoint, "/cacheable.html")
            fresh = [fetch(proxy.endpoint, "/nostore.php") for _ in range(2)]
            delta = settled(proxy, before, 2)
            served = NGINX.counters(backend)["requests"] - served - 1
    finally:
        assert stop_stack(running) == []
    assert {v.status for v in verdicts.values()} == {Status.PASS}, verdicts
    assert verdicts["cache"].detail.startswith("/cacheable.php twice: X-Cache-Status ")
    assert "the server closed the connection" in verdicts["keep-alive"].detail
    assert verdicts["static files"].detail == ("/cacheable.html: 200, the file's bytes, "
                                               "0 sent to a backend")
    assert page.status == 200 and "x-cache-status" not in page.headers
    assert [r.headers["x-cache-status"] for r in fresh] == ["MISS", "MISS"]
    assert fresh[0].body != fresh[1].body      # both made by PHP
    assert (delta["cache_hits"], delta["cache_misses"], delta["backend:0"]) == (0, 2, 2)
    assert served == 2           # the scripts; the file never reached the backend


@pytest.mark.parametrize("expires, status, detail", [
    ("off", Status.WARN, "/index.html twice: X-Cache-Status MISS, then MISS; counters +0 hits "
     "+2 misses: uncacheable (no lifetime in its headers and nginx-proxy.cache_valid_s = 0)"),
    ("1h", Status.PASS, "/index.html twice: X-Cache-Status MISS, then HIT; counters +1 hits "
     "+1 misses"),
])
def test_cache_valid_s_zero_caches_only_what_the_headers_allow(session, expires, status,
                                                              detail):
    deployed = deploy("static-page", session.run_dir("docroot"))
    with nginx_backends(session, deployed.docroot, 1, expires=expires) as backends, \
            proxied(session, backends, deployed.docroot, cache=True, cache_valid_s=0) as proxy:
        [verdict] = [v for v in PROXY.verify(proxy, proxy) if v.check == "cache"]
    assert (verdict.status, verdict.detail) == (status, detail)


@pytest.mark.parametrize("knobs, pattern, replacement, failed", [
    # /_stacklab/ cached: the spread check's requests no longer reach the backends either
    ({"cache": True}, r"proxy_cache off;", "", {"stacklab paths passed", "spread"}),
    ({"cache": True}, r"proxy_cache stacklab;", "proxy_cache off;", {"cache"}),
    ({}, r"location / \{", "location / { proxy_cache_valid 1m; proxy_cache stacklab;",
     {"pass-through"}),
    ({"static": "files"}, r"try_files \$uri \$uri/ @backend;", "proxy_pass http://backends;",
     {"static files"}),
    ({"weights": "1,3"}, r"weight=3", "weight=1", {"spread"}),
])
def test_verify_fails_when_the_config_is_not_what_the_knobs_say(session, monkeypatch, knobs,
                                                                 pattern, replacement, failed):
    """The proxy runs a config its knobs do not describe: the checks that see it FAIL,
    and only those."""
    real = NginxProxy.render

    def render(self, ctx, knobs):
        files = real(self, ctx, knobs)
        conf = files["nginx-proxy.conf"]
        if "proxy_cache stacklab" in replacement:   # a cache zone for it to use
            conf = conf.replace("    server {", "    proxy_cache_path "
                                f'"{ctx.run_dir}/cache" keys_zone=stacklab:1m;\n    server {{', 1)
        files["nginx-proxy.conf"], n = re.subn(pattern, replacement, conf)
        assert n, f"{pattern!r} is not in nginx-proxy.conf: its template changed"
        return files

    monkeypatch.setattr(NginxProxy, "render", render)
    deployed = deploy("static-page", session.run_dir("docroot"))
    with nginx_backends(session, deployed.docroot, 2) as backends, \
            proxied(session, backends, deployed.docroot, **knobs) as proxy:
        verdicts = {v.check: v for v in PROXY.verify(proxy, proxy)}
    assert {name for name, v in verdicts.items() if v.status is Status.FAIL} == failed, \
        verdicts


def test_rendered_config_quotes_paths_and_nginx_accepts_it(tmp_path):
    odd = tmp_path / "lab dir;x'\"y"
    ctx = RenderContext(odd / "run", odd / "docroot", "127.0.0.1", 8080, None, None,
                        backends=(Endpoint("127.0.0.1", 8081),
                                  Endpoint("", 0, unix=odd / "b.sock")))
    conf = PROXY.render(ctx, DEFAULTS | {"cache": True, "static": "files"})["nginx-proxy.conf"]
    quoted = str(odd).replace('"', '\\"')
    assert f'root "{quoted}/docroot";' in conf
    assert f'proxy_cache_path "{quoted}/run/cache" levels=1:2' in conf
    assert f'access_log "{quoted}/run/upstream.log" stacklab_upstream' in conf
    assert f'server "unix:{quoted}/b.sock" weight=1;' in conf
    assert "server 127.0.0.1:8081 weight=1;" in conf
    (ctx.run_dir / "nginx-proxy.conf").write_text(conf)
    test = subprocess.run([*PROXY.command(ctx, DEFAULTS), "-t", "-q"], capture_output=True,
                          text=True)
    assert test.returncode == 0, test.stderr
    with pytest.raises(StackError, match=r"contains '\$'"):
        PROXY.render(RenderContext(tmp_path / "$x", odd, "127.0.0.1", 8080, None, None,
                                   backends=ctx.backends), DEFAULTS)


def test_backends_and_weights_must_match(tmp_path):
    def render(backends, **knobs):
        ctx = RenderContext(tmp_path / "run", tmp_path, "127.0.0.1", 8080, None, None,
                            backends=backends)
        return PROXY.render(ctx, DEFAULTS | knobs)
    two = (Endpoint("127.0.0.1", 8081), Endpoint("127.0.0.1", 8082))
    with pytest.raises(StackError, match=r"nginx-proxy.weights = '1,2,1' gives 3 weights "
                                         r"for 2 backends"):
        render(two, weights="1,2,1")
    with pytest.raises(StackError, match="no backend"):
        render(())
    with pytest.raises(StackError, match="backends of one scheme, got http, https"):
        render((two[0], Endpoint("127.0.0.1", 8443, scheme="https")))
    assert "server 127.0.0.1:8082 weight=3;" in render(two, weights="1,3")["nginx-proxy.conf"]


def test_shares_promised_by_round_robin_only():
    assert PROXY.shares(DEFAULTS, 2) == [0.5, 0.5]
    assert PROXY.shares(DEFAULTS | {"weights": "1,2,1"}, 3) == [0.25, 0.5, 0.25]
    assert PROXY.shares(DEFAULTS | {"balance": "least_conn"}, 3) is None
    with pytest.raises(StackError, match=r"^nginx-proxy.weights = '1,2' gives 2 weights "
                                         r"for 3 backends$"):
        PROXY.shares(DEFAULTS | {"balance": "least_conn", "weights": "1,2"}, 3)
    assert PROXY.overrides_headers(DEFAULTS | {"cache": True}) is False


@pytest.mark.parametrize("knobs, reason", [
    ({}, None),
    ({"weights": "1, 2"}, None),
    ({"weights": "1,x"}, "nginx-proxy.weights must be whole numbers 1..100 separated by "
     "commas, not '1,x'"),
    ({"weights": "0,1"}, "nginx-proxy.weights must be whole numbers 1..100 separated by "
     "commas, not '0,1'"),
    ({"weights": "1,,1"}, "nginx-proxy.weights must be whole numbers 1..100 separated by "
     "commas, not '1,,1'"),
    ({"upstream_keepalive": 600}, "nginx-proxy.upstream_keepalive = 600 idle backend "
     "connections leave no room for clients in nginx-proxy.worker_connections = 1024 "
     "(at most half of it)"),
])
def test_check_refuses_what_cannot_run(knobs, reason):
    assert PROXY.check(DEFAULTS | knobs) == reason
    if "weights" in knobs and reason:    # refused as the spec is read, too
        weights = next(k for k in KNOBS if k.name == "weights")
        with pytest.raises(ValueError, match="^" + re.escape(reason.replace(" must", ": must"))):
            weights.check(knobs["weights"])


@pytest.mark.parametrize("got, towards_even, fits", [
    ([20, 40, 20], False, True), ([22, 38, 20], True, True),
    ([26, 29, 25], True, True),      # least_conn, sequential: 1 of 20 quiet runs (534510b)
    ([26, 29, 25], False, False),    # round_robin must follow the weights
    ([40, 20, 20], True, False),     # a weight turned round is no spread least_conn makes
    ([0, 40, 40], True, False)])
def test_least_conn_may_spread_from_weighted_to_even(got, towards_even, fits):
    from stacklab.stacks.nginx_proxy.checks import spread_fits
    assert spread_fits(got, [1, 2, 1], 0.2 if towards_even else 0.1, towards_even) == fits
