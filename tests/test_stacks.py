"""Real nginx and Apache on loopback: start from our templates, verify, serve, stop, no leftovers."""

import os
import pwd

import pytest

from stacklab import lab, procs
from stacklab.stacks import COMPONENTS, REGISTRY
from stacklab.stacks.base import RenderContext, free_port
from stacklab.errors import StackError
from stacklab.verify import Status, fetch
from stacklab.workloads import deploy

from helpers import ROOT, server_processes

pytestmark = pytest.mark.integration
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture
def session():
    s = lab.open_session()
    yield s
    s.close()


def start(session, name, knobs=None, as_nobody=False):
    deployed = deploy("static-page", session.run_dir("docroot"))
    run_dir = session.run_dir(name)
    if as_nobody:
        nobody = pwd.getpwnam("nobody")
        os.chown(run_dir, nobody.pw_uid, nobody.pw_gid)
        user, group = None, None
    else:
        user, group = lab.server_user()
    ctx = RenderContext(run_dir, deployed.docroot, "127.0.0.1", free_port(), user, group)
    comp = COMPONENTS[name]
    started = comp.start(ctx, {**REGISTRY.defaults(name), **(knobs or {})},
                         run_as="nobody" if as_nobody else None)
    return comp, started, deployed


@pytest.mark.parametrize("name", ["nginx", "apache"])
@pytest.mark.parametrize("as_nobody", [False, True], ids=["as-root-or-self", "as-nobody"])
def test_start_verify_serve_stop(session, name, as_nobody):
    if as_nobody and os.getuid() != 0:
        pytest.skip("already running as a normal user: the other case covers it")
    comp, started, deployed = start(session, name, as_nobody=as_nobody)
    pgid = started.proc.pgid
    try:
        assert len(procs.group_members(pgid)) >= 2   # master and at least one worker
        verdicts = comp.verify(started, deployed.expected)
        assert [v.status for v in verdicts] == [Status.PASS]
        resp = fetch("127.0.0.1", started.ctx.port, "/missing.html")
        assert resp.status == 404
        if as_nobody:
            owners = {os.stat(f"/proc/{p}").st_uid for p in procs.group_members(pgid)}
            assert owners == {pwd.getpwnam("nobody").pw_uid}
    finally:
        comp.stop(started)
    assert procs.group_members(pgid) == []
    assert not any(str(started.ctx.run_dir) in p for p in server_processes())


@pytest.mark.parametrize("name", ["nginx", "apache"])
def test_verify_fails_on_wrong_content(session, name):
    comp, started, deployed = start(session, name)
    try:
        (deployed.docroot / "index.html").write_text("tampered")
        [verdict] = comp.verify(started, deployed.expected)
        assert verdict.status is Status.FAIL
    finally:
        comp.stop(started)


def test_a_server_that_cannot_start_is_a_stack_error_with_its_log(session):
    comp = COMPONENTS["nginx"]
    busy = free_port()
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", busy))
        s.listen()
        deployed = deploy("static-page", session.run_dir("docroot"))
        user, group = lab.server_user()
        ctx = RenderContext(session.run_dir("nginx"), deployed.docroot, "127.0.0.1", busy,
                            user, group)
        with pytest.raises(StackError) as e:
            comp.start(ctx, REGISTRY.defaults("nginx"), ready_timeout_s=5)
    assert "exited" in str(e.value)
    assert "Address already in use" in e.value.log_tail


def test_leftovers_of_a_crashed_session_are_cleaned_up():
    crashed = lab.open_session()
    comp, started, _ = start(crashed, "nginx")
    pgid = started.proc.pgid
    os.close(crashed._lock_fd)            # the owning stacklab "dies": its lock is released
    fresh = lab.open_session()            # the next start cleans up
    try:
        assert procs.group_members(pgid) == []
        assert not crashed.dir.exists()
    finally:
        fresh.close()


@pytest.mark.parametrize("name, knobs, golden", [
    ("nginx", {}, "nginx-default.conf"),
    ("nginx", {"worker_processes": 0, "sendfile": True, "access_log": False,
               "keepalive_timeout": 0}, "nginx-tuned.conf"),
    ("apache", {}, "apache-default.conf"),
    ("apache", {"keepalive": False, "threads_per_child": 64, "max_request_workers": 400},
     "apache-tuned.conf"),
])
def test_rendered_configs_match_golden_files(tmp_path, name, knobs, golden):
    ctx = RenderContext(tmp_path / "RUN", tmp_path / "DOCROOT", "127.0.0.1", 8080,
                        "www-data", "www-data")
    ctx.run_dir.mkdir()
    [text] = COMPONENTS[name].render(ctx, {**REGISTRY.defaults(name), **knobs}).values()
    text = text.replace(str(tmp_path), "/LAB")
    path = GOLDEN / golden
    if os.environ.get("STACKLAB_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()
