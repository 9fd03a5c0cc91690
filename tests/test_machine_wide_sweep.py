"""A lab under one TMPDIR sees and sweeps labs under another (issue 21): a stacklab
killed with -9 left a real server and its session directory under its own root, and only
a later start under the same TMPDIR swept them; a runner recorded no lab running under
another TMPDIR. Every session now registers in one machine-wide registry."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from stacklab.host import lab, procs
from stacklab.netlab.sweep import SWEEPS
from stacklab.errors import UnsafePathError

from helpers import wait_for

pytestmark = pytest.mark.integration

# A stacklab in another process: opens a session under its TMPDIR, starts a real HAProxy
# in it (its backend need not be up), says where, then waits to be killed.
CHILD = """
import json, sys, time
from stacklab.host import lab
from stacklab.netlab.sweep import SWEEPS
from stacklab.host.net import Endpoint
from stacklab.stacks import REGISTRY
from stacklab.stacks.base import RenderContext, free_port
from stacklab.stacks.haproxy import HAProxy

session = lab.open_session(sweeps=SWEEPS)
user, group = lab.server_user()
ctx = RenderContext(session.run_dir("0123456789ab-r0/haproxy"), session.dir, "127.0.0.1",
                    free_port(), user, group, backends=(Endpoint("127.0.0.1", free_port()),))
started = HAProxy().start(ctx, REGISTRY.defaults("haproxy"))
print(json.dumps({"dir": str(session.dir), "pgid": started.proc.pgid}), flush=True)
time.sleep(600)
"""


@pytest.fixture
def two_tmpdirs():
    """Two plain lab parents (every user can search them), neither the other's."""
    made = [Path(tempfile.mkdtemp(prefix=f"sweep{i}-", dir="/tmp")) for i in (1, 2)]
    for path in made:
        path.chmod(0o755)
    yield made
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def start_child(tmpdir: Path) -> tuple[subprocess.Popen, dict]:
    env = {**os.environ, "TMPDIR": str(tmpdir),
           "PYTHONPATH": str(Path(lab.__file__).resolve().parents[1])}   # this checkout
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE,
                             text=True)
    line = child.stdout.readline()
    assert line, f"the child lab exited ({child.wait()}) before starting its server"
    return child, json.loads(line)


def use_tmpdir(monkeypatch, path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(path))
    monkeypatch.setattr(tempfile, "tempdir", None)     # gettempdir() reads TMPDIR again


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_session_killed_under_one_tmpdir_is_swept_by_a_start_under_another(
        two_tmpdirs, monkeypatch):
    first, second = two_tmpdirs
    child, lab_a = start_child(first)
    try:
        assert procs.group_members(lab_a["pgid"]), "HAProxy is not running"
        child.kill()                                  # kill -9: nothing of it runs on
        child.wait()
        assert procs.group_members(lab_a["pgid"]) and Path(lab_a["dir"]).is_dir()
        use_tmpdir(monkeypatch, second)
        session = lab.open_session(sweeps=SWEEPS)                  # under the other TMPDIR
        try:
            assert session.root.parent == second
            wait_for(lambda: not procs.group_members(lab_a["pgid"]), 10,
                     "the killed lab's HAProxy to be stopped")
            assert not Path(lab_a["dir"]).exists()
            token_a = Path(lab_a["dir"]).name.removeprefix("s-")
            assert not (lab.default_registry() / token_a).exists()
        finally:
            session.close()
    finally:
        child.kill()
        kill_group(lab_a["pgid"])


def test_other_labs_sees_a_live_lab_under_another_tmpdir(two_tmpdirs, monkeypatch):
    first, second = two_tmpdirs
    child, lab_a = start_child(first)
    try:
        use_tmpdir(monkeypatch, second)
        with lab.session_scope(sweeps=SWEEPS) as session:
            others = lab.other_labs(session)
            assert {"pid": child.pid, "dir": lab_a["dir"]} in others, others
            assert str(session.dir) not in {o["dir"] for o in others}
    finally:
        child.kill()
        child.wait()
        kill_group(lab_a["pgid"])
        use_tmpdir(monkeypatch, first)
        lab.open_session(sweeps=SWEEPS).close()                    # sweeps the killed child's session


def test_a_live_session_under_another_tmpdir_is_never_swept(two_tmpdirs, monkeypatch):
    first, second = two_tmpdirs
    child, lab_a = start_child(first)
    try:
        use_tmpdir(monkeypatch, second)
        lab.open_session(sweeps=SWEEPS).close()
        assert procs.group_members(lab_a["pgid"]) and Path(lab_a["dir"]).is_dir()
    finally:
        child.kill()
        child.wait()
        kill_group(lab_a["pgid"])
        use_tmpdir(monkeypatch, first)
        lab.open_session(sweeps=SWEEPS).close()


@pytest.mark.parametrize("owner, mode", [(65534, 0o755), (None, 0o777)],
                         ids=["another-users", "world-writable"])
def test_a_registry_someone_else_could_write_is_refused_in_one_line(tmp_path, owner, mode):
    """In /tmp anyone may make /tmp/stacklab-run-<uid> first: its entries name sessions
    whose recorded servers a sweep stops."""
    registry = tmp_path / "stacklab-run-0"
    registry.mkdir()
    registry.chmod(mode)
    if owner is not None:
        os.chown(registry, owner, -1)
    with pytest.raises(UnsafePathError) as e:
        lab.check_registry(registry)
    assert str(registry) in str(e.value) and "\n" not in str(e.value)
