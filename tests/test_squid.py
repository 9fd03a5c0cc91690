"""Squid as a caching reverse proxy in front of a real stack: it answers, verify() is all
PASS, a stored URL is a hit and an uncacheable one (no-store, /_stacklab/) is not, by its
header and by its counters; a disk cache starts cold; nothing is left after stop."""

import os
import pwd
from pathlib import Path

import pytest

from stacklab.host import lab, procs
from stacklab.errors import StackError
from stacklab.host.net import Endpoint, free_port
from stacklab.run.stack import RunningStack, start_stack, stop_stack
from stacklab.stacks import STACKS
from stacklab.stacks.base import RenderContext
from stacklab.stacks.squid import Squid
from stacklab.stacks.squid.adapter import SHM_DIR, service_name
from stacklab.stacks.squid.knobs import KNOBS
from stacklab.stacks.squid.verify import VERIFY_PATH
from stacklab.stacks.tls import make_certificate
from stacklab.measure.verify import CHECK_PATH, Status, fetch
from stacklab.workloads import deploy, place

from helpers import wait_for
from test_stacks import knobs_for

pytestmark = pytest.mark.integration

SQUID = Squid()
DEFAULTS = {k.name: k.default for k in KNOBS}


def squid_ctx(run_dir: Path, docroot: Path, backends, user=None, group=None):
    return RenderContext(run_dir, docroot, "127.0.0.1", free_port(), user, group,
                         backends=tuple(backends))


def start_squid(session, docroot, backend, run_as=None, **overrides):
    user, group = (None, None) if run_as else lab.server_user()
    run_dir = session.run_dir(f"squid-{len(list(session.dir.iterdir()))}")
    if run_as:
        entry = pwd.getpwnam(run_as)
        os.chown(run_dir, entry.pw_uid, entry.pw_gid)
    ctx = squid_ctx(run_dir, docroot, [backend], user, group)
    knobs = DEFAULTS | overrides
    for path, content in SQUID.docroot_files(docroot, knobs).items():   # as stack.py does
        place(docroot, path, content)
    return SQUID.start(ctx, knobs, run_as=run_as)


def marked(run_dir: Path) -> list[int]:
    """Live processes started for run_dir (the mark procs.spawn puts in the environment
    is inherited by helpers, even one that left squid's process group)."""
    mark = f"{procs.MARK}={run_dir}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                found.append(int(pid))
        except OSError:
            continue
    return found


def segments(started) -> list[Path]:
    return list(SHM_DIR.glob(f"{service_name(started.ctx)}-*.shm"))


def stop_squid(started):
    pgid = started.proc.pgid
    SQUID.stop(started)
    assert procs.group_members(pgid) == []
    assert marked(started.ctx.run_dir) == []
    assert segments(started) == []


def twice(started, path, headers=None):
    """`path` fetched twice; the second response and what it moved in the counters."""
    fetch(started.endpoint, path, headers)
    before = SQUID.counters(started)
    resp = fetch(started.endpoint, path, headers)
    after = SQUID.counters(started)
    return resp, {name: after[name] - before[name] for name in after}


@pytest.fixture
def php_backend(session):
    """nginx + PHP-FPM serving php-cache-mix: a static page, a page sent with
    Cache-Control: public, max-age=300 and one sent with no-store."""
    deployed = deploy("php-cache-mix", session.run_dir("docroot-php-cache-mix"))
    running = RunningStack(STACKS["nginx+php-fpm"])
    try:
        start_stack(running, knobs_for("nginx+php-fpm", **{"php-fpm__listen": "tcp"}),
                    deployed, session.run_dir("backend"), make_certificate(session.dir))
        yield deployed, running.started[-1]
    finally:
        pgids = [s.proc.pgid for s in running.started]
        assert stop_stack(running) == []
        assert all(procs.group_members(p) == [] for p in pgids)


@pytest.fixture
def static_backend(session):
    deployed = deploy("static-page", session.run_dir("docroot-static-page"))
    running = RunningStack(STACKS["nginx"])
    try:
        start_stack(running, knobs_for("nginx"), deployed, session.run_dir("backend"),
                    make_certificate(session.dir))
        yield deployed, running.started[-1]
    finally:
        pgid = running.started[0].proc.pgid if running.started else None
        assert stop_stack(running) == []
        assert pgid is None or procs.group_members(pgid) == []


def test_squid_hits_what_it_may_store_and_passes_the_rest(session, php_backend):
    deployed, backend = php_backend
    started = start_squid(session, deployed.docroot, backend.endpoint)
    try:
        members = procs.group_members(started.proc.pgid)
        assert len(members) == SQUID.processes(started.knobs) == 1
        if os.getuid() == 0:      # squid dropped root for the lab's server user
            assert os.stat(f"/proc/{members[0]}").st_uid == pwd.getpwnam(
                lab.server_user()[0]).pw_uid
        verdicts = SQUID.verify(started, started)
        assert [v.status for v in verdicts] == [Status.PASS, Status.PASS], verdicts
        assert verdicts[0].data["path"] == VERIFY_PATH

        cached, moved = twice(started, "/cacheable.php")       # max-age=300
        assert cached.headers["x-cache"].startswith("HIT")
        assert (moved["cache_hits"], moved["cache_misses"], moved["swap.ins"]) == (1, 0, 0)
        store, moved = twice(started, "/uncacheable.php")     # no-store
        assert store.status == 200 and store.headers["x-cache"].startswith("MISS")
        assert (moved["cache_hits"], moved["cache_misses"]) == (0, 1)
        probe, moved = twice(started, CHECK_PATH)
        assert probe.headers["x-cache"].startswith("MISS") and moved["cache_hits"] == 0

        fetch(started.endpoint, "/cacheable.html")            # stored
        before = SQUID.counters(started)
        for _ in range(5):
            assert fetch(started.endpoint, "/cacheable.html").status == 200
        after = SQUID.counters(started)
        # 5 hits, nothing to the backend; the first reading is a request too
        assert after["cache_hits"] - before["cache_hits"] == 5
        assert after["cache_misses"] == before["cache_misses"]
        assert after["client_http.requests"] - before["client_http.requests"] == 6
    finally:
        stop_squid(started)


def test_disk_cache_serves_from_disk_and_starts_cold(session, static_backend):
    """Objects above the in-memory limit are stored on disk only (a hit reads them
    back); a restart in the same run directory empties the cache. Run as nobody, as
    squid -z is too."""
    deployed, backend = static_backend
    run_as = "nobody" if os.getuid() == 0 else None
    knobs = {"disk_cache_mb": 16, "cache_mem_mb": 8, "maximum_object_size_in_memory_kb": 1}
    started = start_squid(session, deployed.docroot, backend.endpoint, run_as, **knobs)
    try:
        verdicts = SQUID.verify(started, started)
        assert [(v.check, v.status) for v in verdicts] == [
            ("cache hit", Status.PASS), ("/_stacklab/ never cached", Status.PASS),
            ("disk cache", Status.PASS)], verdicts
        outs = SQUID.counters(started)["swap.outs"]
        fetch(started.endpoint, "/index.html")      # a miss: then written out (aufs threads)
        wait_for(lambda: SQUID.counters(started)["swap.outs"] > outs, 10,
                 "/index.html written to the disk cache")
        resp, moved = twice(started, "/index.html")
        # read back from disk (squid counts 2 swap.ins per disk hit); from memory: 0
        assert resp.headers["x-cache"].startswith("HIT") and moved["swap.ins"] > 0
    finally:
        stop_squid(started)
    again = SQUID.start(started.ctx, started.knobs, run_as=run_as)
    try:
        assert fetch(again.endpoint, "/index.html").headers["x-cache"].startswith("MISS")
    finally:
        stop_squid(again)


def test_two_squids_keep_apart(session, static_backend):
    """Even with -N squid makes shared memory segments named after its service, unlinks
    that name's segments as it starts and stops, and dies if another creates them at the
    same moment: each squid has its own name (-n), so one leaves another's alone."""
    deployed, backend = static_backend
    first = start_squid(session, deployed.docroot, backend.endpoint)
    try:
        second = start_squid(session, deployed.docroot, backend.endpoint)
        try:
            assert segments(first) and segments(second)
        finally:
            stop_squid(second)
        assert segments(first)
        assert fetch(first.endpoint, VERIFY_PATH).status == 200
    finally:
        stop_squid(first)


def test_verify_fails_when_squid_stores_nothing(session, static_backend, monkeypatch):
    """A squid whose config is not what its knobs say (it caches nothing) FAILs the hit
    check, by its header and by its counters."""
    real = Squid.render

    def render(self, ctx, knobs):
        files = real(self, ctx, knobs)
        assert "\ncache deny stacklab\n" in files["squid.conf"]
        files["squid.conf"] = files["squid.conf"].replace("cache deny stacklab",
                                                          "cache deny all")
        return files

    monkeypatch.setattr(Squid, "render", render)
    deployed, backend = static_backend
    started = start_squid(session, deployed.docroot, backend.endpoint)
    try:
        verdicts = {v.check: v for v in SQUID.verify(started, started)}
    finally:
        stop_squid(started)
    hit = verdicts["cache hit"]
    assert hit.status is Status.FAIL and "X-Cache: MISS" in hit.detail, hit
    assert (hit.data["cache_hits"], hit.data["cache_misses"]) == (0, 1)
    assert verdicts["/_stacklab/ never cached"].status is Status.PASS


def test_rendered_config_keeps_everything_in_the_run_dir(tmp_path):
    run_dir = tmp_path / "squid"
    ctx = squid_ctx(run_dir, tmp_path, [Endpoint("127.0.0.1", 8080)])
    conf = SQUID.render(ctx, DEFAULTS | {"disk_cache_mb": 10})["squid.conf"]
    assert f"cache_dir aufs {run_dir}/cache 10 16 256" in conf
    assert f"access_log stdio:{run_dir}/access.log" in conf
    assert f"pid_filename {run_dir}/squid.pid" in conf
    assert "cache_peer 127.0.0.1 parent 8080 0 " in conf
    directives = "\n".join(line for line in conf.splitlines() if not line.startswith("#"))
    assert "/etc/" not in directives and "/var/" not in directives
    with pytest.raises(StackError, match="cannot be written into a squid config"):
        SQUID.render(squid_ctx(tmp_path / "a b", tmp_path, [Endpoint("127.0.0.1", 80)]),
                     DEFAULTS)


@pytest.mark.parametrize("backends, problem", [
    ([], "exactly one backend"),
    ([Endpoint("127.0.0.1", 80)] * 2, "exactly one backend"),
    ([Endpoint("127.0.0.1", 443, scheme="https")], "plain HTTP"),
])
def test_render_refuses_backends_it_cannot_use(tmp_path, backends, problem):
    with pytest.raises(StackError, match=problem):
        SQUID.render(squid_ctx(tmp_path, tmp_path, backends), DEFAULTS)


@pytest.mark.parametrize("knobs, problem", [
    ({"cache_mem_mb": 0}, "leaves no cache"),
    ({"cache_mem_mb": 1, "maximum_object_size_in_memory_kb": 2048}, "more than all of"),
    ({"disk_cache_mb": 1, "maximum_object_size_kb": 4096}, "whole disk cache"),
])
def test_check_refuses_bad_combinations(knobs, problem):
    assert problem in SQUID.check(DEFAULTS | knobs)


def test_check_accepts_and_inert_names_what_cannot_act():
    assert SQUID.check(DEFAULTS) is None
    assert "acts only with a disk cache" in SQUID.inert({"squid": DEFAULTS})[
        "squid.maximum_object_size_kb"]
    assert SQUID.inert({"squid": DEFAULTS | {"disk_cache_mb": 100}}) == {}
    disk_only = DEFAULTS | {"cache_mem_mb": 0, "disk_cache_mb": 100}
    assert SQUID.check(disk_only) is None
    assert list(SQUID.inert({"squid": disk_only})) == ["squid.maximum_object_size_in_memory_kb"]
