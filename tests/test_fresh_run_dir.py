"""Each run starts from the same disk (issue 39): a run's writable directories are a
fresh filesystem mounted for the run (a tmpfs by default, fs.type's when set), said in
its record, and gone after it — also after a kill, by the lab's sweep. The choice pinned
in tables; the mount, a full one and a killed one with real mounts; then a real
nginx + PHP-FPM run whose PHP sessions land on the run's tmpfs."""

import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.host import lab
from stacklab.netlab import fs, rundir
from stacklab.netlab.rundir import FreshDir, Writable, choose, fresh_dir

from helpers import require_engine, require_root, server_processes, wait_for


def knobs(type_="none", size_mb=512, options="", memory_mb=0) -> dict:
    return {"fs": {"type": type_, "size_mb": size_mb, "options": options,
                   "cold_cache": False},
            "machine": {"memory_mb": memory_mb, "cpus": 0, "cpu_quota": 0}}


# the choice, from the knobs alone ---------------------------------------------------

@pytest.mark.parametrize("given, host_mib, fs_type, size_mib, inodes, options", [
    (knobs(), 24_000, "tmpfs", 2048, 1_048_576, ()),          # capped at 2 GiB
    (knobs(), 8_192, "tmpfs", 2048, 1_048_576, ()),           # on a quarter: 2 GiB
    (knobs(), 8_188, "tmpfs", 2047, 1_048_064, ()),           # a quarter of a smaller host
    (knobs(), 200, "tmpfs", 64, 32_768, ()),                  # never under 64 MiB
    (knobs("tmpfs", options="noatime"), 24_000, "tmpfs", 2048, 1_048_576, ("noatime",)),
    (knobs("ext4", 512, "noatime,data=writeback"), 24_000, "ext4", 2048, None,
     ("noatime", "data=writeback")),                          # at least 2 GiB (sparse)
    (knobs("xfs", 4096), 24_000, "xfs", 4096, None, ()),     # the experiment's, if larger
    (knobs(memory_mb=256), 24_000, "ext4", 2048, None, ()),   # a profile: reclaimable
    (knobs("xfs", memory_mb=256), 24_000, "xfs", 2048, None, ()),
])
def test_the_run_directory_gets_fs_type_s_filesystem_else_a_bounded_tmpfs(
        given, host_mib, fs_type, size_mib, inodes, options):
    choice = choose(given, host_mib)
    assert (choice.fs, choice.size_mib, choice.inodes, choice.options) == \
        (fs_type, size_mib, inodes, options)


# what a full directory says ---------------------------------------------------------

class Statvfs:
    def __init__(self, free_bytes, files=1000, favail=10):
        self.f_bavail, self.f_frsize = free_bytes // 4096, 4096
        self.f_files, self.f_favail = files, favail


TMPFS = Writable("/lab/s-1-aaaaaaaa/r", "tmpfs", True, 64, 32_768, (), "default")


@pytest.mark.parametrize("free_bytes, favail, said", [
    (2**20, 10, None),                                        # 1 MiB left: not full
    (2**20 - 4096, 10, "1.00 MiB left"),                      # under 1 MiB
    (64 * 2**20, 0, "64.00 MiB, no inode left"),              # no inode left
])
def test_a_full_run_directory_fails_the_run_naming_its_filesystem(monkeypatch, free_bytes,
                                                                  favail, said):
    monkeypatch.setattr(os, "statvfs", lambda path: Statvfs(free_bytes, favail=favail))
    full = FreshDir(Path(TMPFS.dir), TMPFS).full()
    if said is None:
        assert full is None
    else:
        assert full.startswith("the run directory's tmpfs (64 MiB, 32,768 inodes) filled "
                               f"up during the run ({said}") and "writes failed" in full


def test_a_tmpfs_without_an_inode_count_is_not_full_for_it(monkeypatch):
    """A filesystem that counts no inodes (f_files 0) is full by its space alone."""
    monkeypatch.setattr(os, "statvfs", lambda path: Statvfs(2**30, files=0, favail=0))
    assert FreshDir(Path(TMPFS.dir), TMPFS).full() is None


# real mounts ------------------------------------------------------------------------

@pytest.fixture
def state_dir(tmp_path_factory):
    """A session-like directory for the mounts' records (absolute, no unsafe path)."""
    require_root("mount the run directory's tmpfs")
    path = tmp_path_factory.mktemp("lab")
    yield path
    fs.cleanup_stale(path)            # whatever a failed test left


def mounts_under(path: Path) -> list[str]:
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(str(path) + "/")]


def test_the_run_directory_is_a_fresh_tmpfs_for_the_run_and_gone_after(state_dir):
    run_dir = state_dir / "abc-r1"
    run_dir.mkdir()
    with fresh_dir("tok-abc-r1", state_dir, run_dir, knobs(), 24_000) as fresh:
        assert fs.fs_type_of(run_dir) == "tmpfs" and fresh.dir == run_dir
        assert mounts_under(state_dir) == [str(run_dir)]
        assert (state_dir / "stacklab-fs-tok-abc-r1-w.json").exists()   # swept after a kill
        shown = fs._mounted(run_dir)
        assert "size=2097152k" in shown[2] and "nr_inodes=1048576" in shown[2]
        assert fresh.writable.record() == {
            "dir": str(run_dir), "fs": "tmpfs", "fresh": True, "size_mib": 2048,
            "inodes": 1_048_576, "options": [], "why": "default"}
        (run_dir / "sessions").mkdir()
        (run_dir / "sessions" / "sess_1").write_text("")
        assert fresh.full() is None
    assert mounts_under(state_dir) == [] and not run_dir.exists()
    assert list(state_dir.iterdir()) == []


def test_a_full_tmpfs_refuses_a_write_at_once(state_dir, monkeypatch):
    """No hang: the writer gets ENOSPC (no space, then no inode), and full() says so."""
    monkeypatch.setattr(rundir, "RUN_TMPFS_MAX_MIB", 64)
    run_dir = state_dir / "abc-r2"
    run_dir.mkdir()
    with fresh_dir("tok-abc-r2", state_dir, run_dir, knobs(), 24_000) as fresh:
        with pytest.raises(OSError) as e, open(run_dir / "log", "wb") as f:
            for _ in range(65):
                f.write(b"\0" * 2**20)
        assert e.value.errno == errno.ENOSPC
        assert "(64 MiB, 32,768 inodes) filled up" in fresh.full()
    monkeypatch.setattr(rundir, "INODE_BYTES", 2**20)           # 64 inodes
    run_dir.mkdir()
    with fresh_dir("tok-abc-r2", state_dir, run_dir, knobs(), 24_000) as fresh:
        with pytest.raises(OSError) as e:
            for n in range(100):
                (run_dir / f"sess_{n}").write_text("")
        assert e.value.errno == errno.ENOSPC
        assert "no inode left" in fresh.full()
    assert mounts_under(state_dir) == []


def test_a_straggler_holding_the_directory_does_not_keep_it_mounted(state_dir):
    """A process left with its working directory in the run directory: the mount is
    detached (umount -l) rather than kept, and goes with the process."""
    run_dir = state_dir / "abc-r3"
    run_dir.mkdir()
    with fresh_dir("tok-abc-r3", state_dir, run_dir, knobs(), 24_000):
        straggler = subprocess.Popen(["sleep", "60"], cwd=run_dir)
    try:
        assert mounts_under(state_dir) == []
    finally:
        straggler.kill()
        straggler.wait()


KILLED = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from stacklab.netlab.rundir import fresh_dir
    state, run = Path(sys.argv[1]), Path(sys.argv[2])
    knobs = {"fs": {"type": sys.argv[3], "size_mb": 512, "options": ""},
             "machine": {"memory_mb": 0}}
    with fresh_dir("tok-abc-r4", state, run, knobs, 24000):
        print("mounted", flush=True)
        time.sleep(60)
""")


@pytest.mark.parametrize("fs_type", ["none", "ext4"])
def test_a_run_killed_with_its_directory_mounted_is_swept_by_the_next_start(state_dir,
                                                                           fs_type):
    """kill -9 inside the run: the mount (and an ext4's loop device and image) stays
    recorded, and the lab's sweep of a dead session (netlab.sweep's fs.cleanup_stale)
    removes it."""
    if fs_type == "ext4" and fs.why_not("ext4"):
        pytest.fail(f"ext4 cannot be had here: {fs.why_not('ext4')}")
    run_dir = state_dir / "abc-r4"
    run_dir.mkdir()
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(state_dir), str(run_dir),
                              fs_type], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "mounted"
        assert mounts_under(state_dir) == [str(run_dir)]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert mounts_under(state_dir) == [str(run_dir)]       # left behind by the kill
    removed = fs.cleanup_stale(state_dir)
    assert f"mount {run_dir}" in removed
    assert mounts_under(state_dir) == [] and list(state_dir.glob("stacklab-fs-*")) == []


# a real run -------------------------------------------------------------------------

SESSIONS = """
[experiment]
name = "fresh"
repetitions = 2
requests = 2000
warmup = "0s"
remeasure = 0

[matrix]
stack = ["nginx+php-fpm"]
workload = ["php-blank"]
concurrency = [4]
php.session_auto_start = [true]
"""


@pytest.mark.integration
def test_php_sessions_are_written_on_the_run_s_own_tmpfs_gone_after_it(tmp_path,
                                                                       monkeypatch):
    """nginx + PHP-FPM with a session per request, two runs: while each run's servers
    run (seen when the run is judged, before its logs are kept) its directory is a tmpfs
    of its own holding its PHP sessions, with no mount of the run before it left; the
    record says where; after the command nothing of it is left."""
    require_root("mount the run directory's tmpfs")
    require_engine()
    seen = []
    full = FreshDir.full

    def looking(self):
        session = self.dir.parent
        seen.append({"dir": self.dir, "fs": fs.fs_type_of(self.dir),
                     "sessions": len(list(self.dir.glob("*/sessions/sess_*"))),
                     "mounts": mounts_under(session)})
        return full(self)

    monkeypatch.setattr(FreshDir, "full", looking)
    base = Path(tempfile.mkdtemp(prefix="stacklab-test-"))   # www-data reaches it
    base.chmod(0o755)
    root = base / "lab"
    monkeypatch.setattr(lab, "default_root", lambda: root)
    spec, db = tmp_path / "fresh.toml", tmp_path / "r.db"
    spec.write_text(SESSIONS)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    first, second = seen
    for run in seen:
        assert run["fs"] == "tmpfs" and run["sessions"] >= 2000, run
        assert run["mounts"] == [str(run["dir"])], run       # its own, and nothing else
    assert first["dir"] != second["dir"] and not first["dir"].exists()
    conn = sqlite3.connect(db)
    for outcome, resources in conn.execute("SELECT outcome, resources_json FROM runs"):
        res = json.loads(resources)
        assert outcome == "ok"
        assert res["_writable"]["fs"] == "tmpfs" and res["_writable"]["fresh"] is True
        assert res["_writable"]["size_mib"] > 0 and res["_writable"]["docroot_dirs"] == []
        assert res["_host"]["run_dir_fs"] == "tmpfs"
    assert mounts_under(root) == [] and list(root.glob("s-*")) == []
    assert server_processes() == []
    shutil.rmtree(base)
