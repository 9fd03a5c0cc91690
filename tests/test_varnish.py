"""Varnish in front of real backends (nginx, webfs) on loopback: it caches what it should
and passes what it should, by its headers and by varnishstat; spreads over replicas;
verify() passes, and fails when the running config is not what the knobs say; stop leaves
no process of either group."""

import contextlib
import json
import os
import pwd
import subprocess
from pathlib import Path

import pytest

from stacklab.host import lab, procs
from stacklab.errors import StackError
from stacklab.host.net import Endpoint
from stacklab.stacks import COMPONENTS, REGISTRY
from stacklab.stacks.base import RenderContext, free_port
from stacklab.stacks.varnish import Varnish
from stacklab.stacks.varnish.adapter import parse_varnishstat
from stacklab.stacks.varnish.knobs import KNOBS
from stacklab.stacks.varnish.verify import change, quiet
from stacklab.measure.verify import CHECK_PATH, Status, fetch
from stacklab.workloads import deploy

from helpers import require_root

pytestmark = pytest.mark.integration

VARNISH = Varnish()
DEFAULTS = {k.name: k.default for k in KNOBS}


def hit(resp) -> bool:
    """X-Varnish has two transaction ids on a hit, one otherwise."""
    return len(resp.headers["x-varnish"].split()) == 2


@contextlib.contextmanager
def running(session, backend="nginx", replicas=1, run_as=None, backend_knobs=None, **knobs):
    """`replicas` backends serving the static page and Varnish (its defaults, `knobs`)
    in front of them; everything stopped afterwards, no process of any group left."""
    deployed = deploy("static-page", session.run_dir("docroot"))
    user, group = (None, None) if run_as else lab.server_user()
    started, groups = [], []
    try:
        for i in range(replicas):
            ctx = RenderContext(session.run_dir(f"{backend}-{i}"), deployed.docroot,
                                "127.0.0.1", free_port(), *lab.server_user())
            started.append((COMPONENTS[backend], COMPONENTS[backend].start(
                ctx, REGISTRY.defaults(backend) | (backend_knobs or {}))))
        ctx = RenderContext(session.run_dir("varnish"), deployed.docroot, "127.0.0.1",
                            free_port(), user, group,
                            backends=tuple(s.endpoint for _, s in started))
        started.append((VARNISH, VARNISH.start(ctx, DEFAULTS | knobs, run_as=run_as)))
        groups = [s.proc.pgid for _, s in started]
        yield started[-1][1], [s for _, s in started[:-1]]
    finally:
        for component, s in reversed(started):
            component.stop(s)
    assert all(procs.group_members(g) == [] for g in groups)


def settled(varnish, before, sent):
    """Counters' change once varnishstat holds the `sent` requests (see verify.quiet)."""
    return change(before, quiet(VARNISH, varnish, sent, before))


def test_caches_passes_counts_and_verifies(session):
    with running(session) as (varnish, (nginx,)):
        started = quiet(VARNISH, varnish)
        verdicts = VARNISH.verify(varnish, varnish)
        assert [(v.check, v.status) for v in verdicts] == [("cached", Status.PASS),
                                                             ("cookies", Status.PASS)]
        assert "kept 120.0 s (expected 120), grace 10 s" in verdicts[0].detail
        assert "passed to the backend" in verdicts[1].detail
        before = quiet(VARNISH, varnish)
        pages = [fetch(varnish.endpoint, "/index.html") for _ in range(2)]
        cookie = fetch(varnish.endpoint, "/index.html", {"Cookie": "session=1"})
        probes = [fetch(varnish.endpoint, CHECK_PATH) for _ in range(2)]
        delta = settled(varnish, before, 5)
        users = {os.stat(f"/proc/{p}").st_uid for p in procs.group_members(varnish.proc.pgid)}
    # readiness asked for the check page, passed: the cache was empty when ready
    assert (started["n_object"], started["cache_miss"], started["cache_hit"]) == (0, 0, 0)
    assert started["s_pass"] >= 1
    assert [r.status for r in pages + [cookie] + probes] == [200] * 5
    assert [hit(r) for r in pages + [cookie] + probes] == [False, True, False, False, False]
    assert pages[1].body == pages[0].body and int(pages[1].headers["age"]) >= 0
    # one hit; the first fetch, the Cookie request and both probes went to the backend
    assert (delta["cache_hits"], delta["cache_misses"], delta["backend:0"]) == (1, 4, 4)
    assert (delta["cache_miss"], delta["s_pass"], delta["n_object"]) == (1, 3, 1)
    if os.getuid() == 0:      # the unix jail runs manager and child as the lab's user
        assert users == {pwd.getpwnam(lab.server_user()[0]).pw_uid}


def test_round_robin_spreads_over_replicas(session):
    with running(session, replicas=2) as (varnish, backends):
        before = quiet(VARNISH, varnish)
        served = [COMPONENTS["nginx"].counters(b)["requests"] for b in backends]
        for _ in range(4):
            assert fetch(varnish.endpoint, CHECK_PATH).status == 200
        delta = settled(varnish, before, 4)
        served = [COMPONENTS["nginx"].counters(b)["requests"] - n - 1   # the reading itself
                  for b, n in zip(backends, served)]
        assert "directors.round_robin()" in varnish.files["default.vcl"]
    assert (delta["backend:0"], delta["backend:1"]) == (2, 2)
    assert served == [2, 2]      # and each nginx counted what Varnish says it sent


@pytest.mark.parametrize("honour", [True, False])
def test_an_expired_response_is_cached_only_when_cache_control_is_overridden(session,
                                                                             honour):
    """webfsd dates Expires from the file's mtime (2020 for every deployed file): with
    expires 60 its pages are already expired, which Varnish honours unless told not to."""
    with running(session, "webfs", backend_knobs={"expires": 60},
                 honour_cache_control=honour, ttl=300) as (varnish, _):
        before = quiet(VARNISH, varnish)
        pages = [fetch(varnish.endpoint, "/index.html") for _ in range(2)]
        delta = settled(varnish, before, 2)
        verdicts = {v.check: v for v in VARNISH.verify(varnish, varnish)}
    assert pages[0].headers["expires"] == "Wed, 01 Jan 2020 00:01:00 GMT"
    assert hit(pages[1]) is not honour
    # honoured: the second request found the hit-for-miss marker, and went to the backend
    assert (delta["cache_hits"], delta["cache_misses"], delta["cache_hitmiss"],
            delta["backend:0"]) == ((0, 2, 1, 2) if honour else (1, 1, 0, 1))
    assert verdicts["cached"].status is Status.PASS
    if honour:
        assert verdicts["cached"].detail.startswith("not cached, and nothing should be")
        assert verdicts["cookies"].status is Status.WARN
    else:
        assert "(expected 300)" in verdicts["cached"].detail
        assert verdicts["cookies"].status is Status.PASS


def test_cookies_stripped_when_not_honoured(session):
    with running(session, honour_cookies=False, grace=30) as (varnish, _):
        verdicts = {v.check: v for v in VARNISH.verify(varnish, varnish)}
        first = fetch(varnish.endpoint, "/index.html", {"Cookie": "session=1"})
        second = fetch(varnish.endpoint, "/index.html", {"Cookie": "session=2"})
    assert {v.status for v in verdicts.values()} == {Status.PASS}
    assert "grace 30 s" in verdicts["cached"].detail
    assert "served from the cache" in verdicts["cookies"].detail
    assert (hit(first), hit(second)) == (False, True)


def test_runs_unprivileged_as_the_user_that_starts_it(session):
    require_root("starting varnishd as nobody")
    with running(session, run_as="nobody") as (varnish, _):
        verdicts = VARNISH.verify(varnish, varnish)
        pids = procs.group_members(varnish.proc.pgid)
        assert "-j none" in " ".join(VARNISH.command(varnish.ctx, varnish.knobs))
        assert {os.stat(f"/proc/{p}").st_uid for p in pids} == {pwd.getpwnam("nobody").pw_uid}
    assert {v.status for v in verdicts} == {Status.PASS}


def test_verify_fails_when_varnish_does_not_run_its_knobs(session, monkeypatch):
    """The knobs say ttl 120 and cookies honoured; the running varnishd has -t 30 and a VCL
    that strips cookies: both checks say so."""
    real_command, real_render = Varnish.command, Varnish.render
    monkeypatch.setattr(Varnish, "command", lambda self, ctx, k: [
        "30" if a == "120" else a for a in real_command(self, ctx, k)])
    monkeypatch.setattr(Varnish, "render", lambda self, ctx, k: {
        name: text.replace("    return (pass);\n    }\n", "    return (pass);\n    }\n"
                           "    unset req.http.Cookie;\n", 1)
        for name, text in real_render(self, ctx, k).items()})
    with running(session) as (varnish, _):
        verdicts = {v.check: v for v in VARNISH.verify(varnish, varnish)}
    assert verdicts["cached"].status is Status.FAIL
    assert "(expected 120)" in verdicts["cached"].detail
    assert verdicts["cached"].data["ttl_s"] == pytest.approx(30, abs=1.5)
    assert verdicts["cookies"].status is Status.FAIL
    assert verdicts["cookies"].detail.startswith("a request with a Cookie was served from "
                                                 "the cache (varnish.honour_cookies on)")


def render(tmp_path, backends, **knobs):
    ctx = RenderContext(tmp_path, tmp_path, "127.0.0.1", 6081, None, None, backends=backends)
    return VARNISH.render(ctx, DEFAULTS | knobs)["default.vcl"]


@pytest.mark.parametrize("knobs", [{}, {"honour_cookies": False,
                                        "honour_cache_control": False}])
def test_rendered_vcl_quotes_paths_and_compiles(tmp_path, knobs):
    odd = tmp_path / "a dir; {x}"
    backends = (Endpoint("127.0.0.1", 8080), Endpoint("127.0.0.1", 0, unix=odd / "s.sock"))
    vcl = render(tmp_path, backends, **knobs)
    assert f'.path = "{odd}/s.sock";' in vcl
    (tmp_path / "default.vcl").write_text(vcl)
    out = subprocess.run([VARNISH.binary, "-C", "-f", str(tmp_path / "default.vcl"),
                          "-n", str(tmp_path / "work"), "-j", "none"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "import directors" not in render(tmp_path, backends[:1])
    with pytest.raises(StackError, match="cannot be written into a vcl config"):
        render(tmp_path, (Endpoint("127.0.0.1", 0, unix=Path('/tmp/a"b')),))


def test_render_refuses_what_varnish_cannot_talk_to(tmp_path):
    with pytest.raises(StackError, match="no backends"):
        render(tmp_path, ())
    with pytest.raises(StackError, match="plain HTTP to its backends, not https"):
        render(tmp_path, (Endpoint("127.0.0.1", 8443, scheme="https"),))


def test_what_it_promises_the_runner():
    assert VARNISH.shares(DEFAULTS, 3) == [1 / 3] * 3
    assert not VARNISH.overrides_headers(DEFAULTS)
    assert VARNISH.overrides_headers(DEFAULTS | {"honour_cache_control": False})
    assert VARNISH.overrides_headers(DEFAULTS | {"honour_cookies": False})


def test_check_refuses_a_pool_minimum_above_its_maximum():
    assert VARNISH.check(DEFAULTS) is None
    problem = VARNISH.check(DEFAULTS | {"thread_pool_min": 200, "thread_pool_max": 100})
    assert "varnish.thread_pool_min (200)" in problem
    assert "varnish.thread_pool_max (100)" in problem


def test_varnishstat_json_is_read_and_refused_when_it_is_not_that():
    doc = {"version": 1, "counters": {f"MAIN.{n}": {"value": v} for n, v in [
        ("client_req", 9), ("cache_hit", 5), ("cache_miss", 2), ("s_pass", 1),
        ("cache_hitpass", 0), ("cache_hitmiss", 1)]}}
    doc["counters"]["VBE.boot.b1.req"] = {"value": 4}
    got = parse_varnishstat(json.dumps(doc), 2)
    # the hit-for-miss is in cache_miss already
    assert (got["cache_hits"], got["cache_misses"], got["backend:1"]) == (5, 3, 4)
    assert "backend:0" not in got
    with pytest.raises(ValueError, match="unexpected varnishstat output"):
        parse_varnishstat(json.dumps({**doc, "version": 2}), 1)
    del doc["counters"]["MAIN.s_pass"]
    with pytest.raises(ValueError, match="MAIN.s_pass"):
        parse_varnishstat(json.dumps(doc), 1)
