"""The fake process runner (fakes.FakeProcesses) stands in at procs.spawn's one seam
(procs.started_by) and keeps what stacklab relies on of a server's process: a real pid in
its own session and process group, the run's mark in its environment, the pgids file,
stop_group() and cleanup_leftovers(). A start it fails reads as a real failing binary's
does, so a test of what happens around a failed start needs no patched command."""

import os
import signal
import time

import pytest

from stacklab.errors import StackError
from stacklab.host import procs
from stacklab.host.net import free_port
from stacklab.stacks.base import RenderContext

from dummy_component import PyHttp
from fakes import FakeProcesses
from helpers import wait_for

KNOBS = {"keepalive": True, "cpus": ""}


class FalsePy(PyHttp):
    """The dummy component with a binary that refuses to run: exit 1 at once."""

    def command(self, ctx, knobs):
        return ["/bin/false"]


def context(tmp_path, name: str = "srv") -> RenderContext:
    docroot = tmp_path / "docroot"
    docroot.mkdir(exist_ok=True)
    return RenderContext(tmp_path / name, docroot, "127.0.0.1", free_port(), None, None)


def start(tmp_path, argv=("/usr/sbin/nginx", "-c", "nginx.conf"), name="nginx"):
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return procs.spawn(name, list(argv), run_dir, run_dir / "server.out")


def test_what_would_run_is_recorded_and_a_placeholder_runs_in_its_place(
        tmp_path, fake_processes):
    proc = start(tmp_path)
    [started] = fake_processes.started
    assert (started.name, started.argv) == ("nginx", ["/usr/sbin/nginx", "-c", "nginx.conf"])
    assert started.run_dir == tmp_path / "run" and started.pid == proc.pgid
    assert started.env[procs.MARK] == str(tmp_path / "run")
    assert proc.alive() and procs.group_members(proc.pgid) == [proc.pgid]
    assert os.getpgid(proc.pgid) == os.getsid(proc.pgid) == proc.pgid    # its own session
    assert (tmp_path / "run" / procs.PGIDS_FILE).read_text() == f"{proc.pgid} sleep\n"
    procs.stop(proc)
    assert not proc.alive() and procs.group_members(proc.pgid) == []


def test_a_placeholder_left_by_a_crash_is_found_and_stopped(tmp_path, fake_processes):
    """cleanup_leftovers stops it as it would a server: what runs is what the pgids file
    names, and the run's mark is in its environment."""
    proc = start(tmp_path)
    assert procs.cleanup_leftovers(tmp_path / "run") == [proc.pgid]
    assert procs.group_members(proc.pgid) == []
    proc.popen.wait(timeout=5)


def test_a_start_it_fails_is_the_one_line_a_real_failing_binary_gives(tmp_path,
                                                                     fake_processes):
    fake_processes.real("py-http")
    with pytest.raises(StackError) as real:
        FalsePy().start(context(tmp_path, "real"), KNOBS, ready_timeout_s=5)
    fake_processes.fail("py-http", code=1)
    with pytest.raises(StackError) as fake:
        PyHttp().start(context(tmp_path, "fake"), KNOBS, ready_timeout_s=5)
    assert str(fake.value) == str(real.value) == \
        "py-http exited with code 1 before becoming ready"
    assert fake_processes.names() == ["py-http", "py-http"]
    assert fake_processes.started[0].argv == ["/bin/false"]


def test_what_a_failing_start_says_is_in_its_log_tail(tmp_path, fake_processes):
    fake_processes.fail("py-http", code=1, says="py-http: [emerg] bind() failed")
    with pytest.raises(StackError) as e:
        PyHttp().start(context(tmp_path), KNOBS, ready_timeout_s=5)
    assert "[server.out] py-http: [emerg] bind() failed" in e.value.log_tail


@pytest.mark.integration
def test_a_missing_binary_raises_what_popen_raises(tmp_path, fake_processes):
    fake_processes.missing("nginx")
    fake_processes.real("real")
    with pytest.raises(FileNotFoundError) as fake:
        start(tmp_path)
    with pytest.raises(FileNotFoundError) as real:
        start(tmp_path, argv=("/nonexistent/nginx",), name="real")
    assert (fake.value.errno, fake.value.strerror) == (real.value.errno, real.value.strerror)
    assert (fake.value.filename, real.value.filename) == ("/usr/sbin/nginx",
                                                          "/nonexistent/nginx")
    assert fake_processes.started[0].pid is None


def test_a_process_made_to_die_dies_by_its_signal(tmp_path, fake_processes):
    fake_processes.die("nginx", after_s=0.2)
    proc = start(tmp_path)
    assert proc.alive()
    wait_for(lambda: not proc.alive(), 10, "the process to die")
    assert proc.popen.returncode == -signal.SIGKILL


def test_a_component_let_run_for_real_serves(tmp_path, fake_processes):
    """A real start goes through the same seam, recorded like the others."""
    fake_processes.real("py-http")
    component = PyHttp()
    started = component.start(context(tmp_path), KNOBS, ready_timeout_s=15)
    try:
        assert component.ready(started)
        assert fake_processes.started[0].argv == [str(tmp_path / "srv" / "serve.sh")]
    finally:
        component.stop(started)


def test_a_fake_that_holds_never_becomes_ready(tmp_path, fake_processes):
    """A placeholder answers no request: a start that waits for its server to be ready
    times out, with how many processes were there, and leaves none."""
    began = time.monotonic()
    with pytest.raises(StackError, match=r"^py-http not ready on 127\.0\.0\.1:\d+ after "
                                         r"0\.5 s \(1 of 1 configured processes\)"
                                         r"(; the host was busy meanwhile: .*)?$"):
        PyHttp().start(context(tmp_path), KNOBS, ready_timeout_s=0.5)
    assert time.monotonic() - began < 10
    [started] = fake_processes.started
    assert procs.group_members(started.pid) == []


def test_outside_the_fixture_servers_are_started_for_real(tmp_path):
    assert procs.RUNNER is procs._popen
    with procs.started_by(FakeProcesses()) as fake:
        assert procs.RUNNER is fake
    assert procs.RUNNER is procs._popen
