"""Machine profiles on the real kernel's cgroups (v1 here: cpu, cpuacct, cpuset and
memory mounts) and the v2 path's file writing against a fake tree: this machine's v2
mount (/sys/fs/cgroup/unified) offers only hugetlb, no cpu, cpuset or memory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers import require_root
from stacklab.netlab import cgroupfiles, cgroups
from stacklab.netlab.cgroups import (CgroupBusyError, Hierarchy, Profile,
                                     cleanup_stale, create_group, detect, settings)

pytestmark = pytest.mark.integration



@pytest.fixture
def _as_root():
    require_root("creating cgroups")


needs_root = pytest.mark.usefixtures("_as_root")
ROOT = Path(__file__).resolve().parents[1]


def run_id(tag: str) -> str:
    return f"t{os.getpid()}-{tag}"


@pytest.fixture
def groups(tmp_path):
    """Groups made by a test, closed afterwards (their processes stopped first)."""
    made = []
    yield made
    for g in made:
        for pids in g.pids().values():
            for pid in pids:
                _kill(pid)
        g.close()
    assert not (tmp_path / cgroupfiles.STATE_FILE).exists()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    try:
        os.waitpid(pid, 0)          # ours, or reparented to this run (a subreaper)
    except ChildProcessError:
        pass


def python(code: str, group, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                            preexec_fn=group.preexec(), stdout=subprocess.PIPE, text=True, **kw)


# --- validation, and what each profile writes (pure)


@pytest.mark.parametrize("kwargs, names", [
    ({"cpus": 0}, "cpus=0"), ({"cpus": 999}, "cpus=999"), ({"cpus": True}, "cpus=True"),
    ({"cpu_quota": 0}, "cpu_quota=0"), ({"cpu_quota": -1.0}, "cpu_quota=-1.0"),
    ({"cpu_quota": 0.001}, "cpu_quota=0.001"), ({"cpu_quota": 999.0}, "cpu_quota=999.0"),
    ({"cpu_quota": "0.5"}, "cpu_quota='0.5'"),
    ({"memory_mb": 16}, "memory_mb=16"), ({"memory_mb": 64.5}, "memory_mb=64.5"),
])
def test_profile_refuses_with_field_and_value(kwargs, names):
    with pytest.raises(ValueError, match=names.replace("(", r"\(").replace(".", r"\.")):
        Profile(**kwargs)


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "a b", "-x", "x" * 65, "a\nb"])
def test_run_id_is_checked_before_anything(bad, tmp_path):
    with pytest.raises(ValueError, match="run id"):
        create_group(bad, tmp_path, Profile(), hierarchies={})
    assert not (tmp_path / cgroupfiles.STATE_FILE).exists()


def test_settings_per_version():
    p = Profile(cpus=1, cpu_quota=0.25, memory_mb=64)
    v1 = settings(p, dict.fromkeys(("cpu", "cpuset", "memory"), 1), "0", "0")
    v2 = settings(p, dict.fromkeys(("cpu", "cpuset", "memory"), 2), "0", "0")
    assert [(s.file, s.value) for s in v1] == [
        ("cpuset.cpus", "0"), ("cpuset.mems", "0"), ("cpu.cfs_period_us", "100000"),
        ("cpu.cfs_quota_us", "25000"), ("memory.limit_in_bytes", "67108864"),
        ("memory.memsw.limit_in_bytes", "67108864")]
    assert [(s.file, s.value) for s in v2] == [
        ("cpuset.cpus", "0"), ("cpuset.mems", "0"), ("cpu.max", "25000 100000"),
        ("memory.max", "67108864"), ("memory.swap.max", "0")]
    assert settings(Profile(), {}) == []
    assert cgroups.format_cpus([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


# --- this machine


def test_detect_tells_v1_from_v2():
    found = detect()
    for ctrl, h in found.items():
        if h.version == 1:
            assert not (h.mount / "cgroup.controllers").exists(), ctrl
        else:
            assert ctrl in (h.mount / "cgroup.controllers").read_text().split()
    # Here: v1 for what the profiles need; the cgroup2 mount offers only hugetlb.
    needed = {c: found[c].version for c in ("cpu", "cpuset", "memory") if c in found}
    if needed != {"cpu": 1, "cpuset": 1, "memory": 1}:
        pytest.skip(f"not this lab machine's layout: {needed}")
    unified = Path("/sys/fs/cgroup/unified")
    assert found["hugetlb"] == Hierarchy(2, unified, "/", found["hugetlb"].own)
    assert (unified / "cgroup.controllers").read_text().split() == ["hugetlb"]


@needs_root
def test_quota_holds_a_busy_process_to_a_quarter_core(tmp_path, groups):
    g = create_group(run_id("quota"), tmp_path, Profile(cpu_quota=0.25))
    groups.append(g)
    busy = """
        import time
        start, cpu = time.monotonic(), time.process_time()
        while time.monotonic() - start < 2.0:
            pass
        print(time.process_time() - cpu)
    """
    for attempt in range(2):        # other work on the 2 cores can only lower the share
        p = python(busy, g)
        time.sleep(0.2)
        ok, detail = g.verify(p.pid)
        cores = float(p.communicate(timeout=20)[0]) / 2.0
        assert ok, detail
        assert cores <= 0.25 * 1.3, f"{cores:.3f} cores under a 0.25 quota"
        if cores >= 0.25 * 0.7:
            break
    assert cores >= 0.25 * 0.7, f"{cores:.3f} cores under a 0.25 quota, twice"
    use = g.usage()
    assert use["cpu_throttled_periods"] > 0 and use["cpu_throttled_s"] > 0.5, use
    assert use["cpu_usage_s"] >= cores * 2.0 * 0.9, use
    assert "cpu.cfs_quota_us=25000" in detail


@needs_root
def test_one_cpu_pins_a_server_and_its_children(tmp_path, groups):
    g = create_group(run_id("pin"), tmp_path, Profile(cpus=1))
    groups.append(g)
    assert g.cpus == cgroups.format_cpus(sorted(os.sched_getaffinity(0))[:1])
    p = python("""
        import subprocess
        child = subprocess.Popen(["sleep", "30"])
        print(child.pid, flush=True)
        child.wait()
    """, g, start_new_session=True)
    grandchild = None
    try:
        grandchild = int(p.stdout.readline())
        for pid in (p.pid, grandchild):
            status = Path(f"/proc/{pid}/status").read_text()
            assert f"Cpus_allowed_list:\t{g.cpus}\n" in status
            ok, detail = g.verify(pid)
            assert ok, detail
        ok, detail = g.verify(os.getpid())
        assert not ok and f"pid {os.getpid()} is in" in detail
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        if grandchild:
            _kill(grandchild)


@needs_root
def test_memory_limit_oom_kills_a_process_allocating_beyond_it(tmp_path, groups):
    """Under v1 here the memcg OOM killer SIGKILLs it (a page fault cannot fail with
    ENOMEM, so Python never sees a MemoryError); the peak stops at the limit."""
    g = create_group(run_id("oom"), tmp_path, Profile(memory_mb=64))
    groups.append(g)
    p = python("""
        b = bytearray(200 * 2**20)
        for i in range(0, len(b), 4096):
            b[i] = 1
        print("survived")
    """, g)
    out = p.communicate(timeout=30)[0]
    assert p.returncode == -signal.SIGKILL and "survived" not in out
    use = g.usage()
    # memory_limit_hits (v1 memory.failcnt and memsw.failcnt) stays 0 on this kernel
    # (6.18) even here: the OOM kill and the peak at the limit are what show it.
    assert use["memory_oom_kills"] == 1 and use["memory_limit_hits"] is not None, use
    assert use["memory_peak_bytes"] == 64 * 2**20, use


@needs_root
def test_close_refuses_a_group_with_processes_then_leaves_nothing(tmp_path):
    g = create_group(run_id("busy"), tmp_path, Profile(cpu_quota=0.5, memory_mb=64))
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        g.add(sleeper.pid)
        assert g.verify(sleeper.pid)[0]
        with pytest.raises(CgroupBusyError, match=f"pids {sleeper.pid}"):
            g.close(grace_s=0.2)
        assert all(p.dir.is_dir() for p in g.places)
        assert (tmp_path / cgroupfiles.STATE_FILE).exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    g.close()
    assert not any(p.dir.exists() for p in g.places)
    assert not (tmp_path / cgroupfiles.STATE_FILE).exists()


CREATOR = """
import os, subprocess, sys, time
from pathlib import Path
from stacklab.netlab import cgroups
state, rid, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
made = []
real_mkdir = cgroups._make_dir
def mkdir_then_maybe_stop(path):
    real_mkdir(path)
    made.append(path)
    if mode == "midway" and len(made) == 2:
        print("midway", flush=True)
        time.sleep(60)              # SIGKILLed here: recorded, half made, no limits
cgroups._make_dir = mkdir_then_maybe_stop
g = cgroups.create_group(rid, state, cgroups.Profile(cpus=1, cpu_quota=0.5, memory_mb=64))
server = subprocess.Popen(["sleep", "60"], preexec_fn=g.preexec(), start_new_session=True)
print(server.pid, flush=True)
time.sleep(60)
"""


def start_creator(tmp_path, rid, mode):
    p = subprocess.Popen([sys.executable, "-c", CREATOR, str(tmp_path), rid, mode],
                         stdout=subprocess.PIPE, text=True, cwd=ROOT)
    return p, p.stdout.readline().strip()


@needs_root
def test_creator_killed_midway_leaves_records_cleanup_removes(tmp_path):
    rid = run_id("midway")
    p, said = start_creator(tmp_path, rid, "midway")
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert said == "midway"
    records = cgroups._records(tmp_path)
    assert len(records) == 4 and all(r.endswith("/stacklab-" + rid) for r in records)
    assert sum(Path(r).is_dir() for r in records) == 2
    report = cleanup_stale(tmp_path)
    assert len(report.removed) == 2 and not report.busy and not report.refused
    assert not any(Path(r).exists() for r in records)
    assert not (tmp_path / cgroupfiles.STATE_FILE).exists()


@needs_root
def test_creator_killed_with_a_server_inside_cleanup_kills_nothing(tmp_path):
    rid = run_id("killed")
    p, said = start_creator(tmp_path, rid, "full")
    server = int(said)
    p.send_signal(signal.SIGKILL)
    p.wait()
    try:
        report = cleanup_stale(tmp_path)
        assert len(report.busy) == 4 and all(pids == [server] for pids in report.busy.values())
        assert not report.removed
        os.kill(server, 0)                      # still running: cleanup killed nothing
    finally:
        _kill(server)                           # what the caller's process cleanup does
    report = cleanup_stale(tmp_path)
    assert len(report.removed) == 4 and not report.busy
    assert not (tmp_path / cgroupfiles.STATE_FILE).exists()


def test_cleanup_acts_only_on_the_labs_own_records(tmp_path):
    lines = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory/process_api",
             str(tmp_path / "stacklab-x"), "/sys/fs/cgroup/cpu/../cpu/stacklab-x",
             "relative/stacklab-x", "/sys/fs/cgroup/cpu/stacklab-never-made"]
    (tmp_path / cgroupfiles.STATE_FILE).write_text("".join(f"{x}\n" for x in lines)
                                               + "/sys/fs/cgroup/cpu/stacklab-cut")
    (tmp_path / "stacklab-x").mkdir()
    report = cleanup_stale(tmp_path)
    assert report.refused == lines[:5] and not report.removed and not report.busy
    assert (tmp_path / "stacklab-x").is_dir() and Path("/sys/fs/cgroup/cpu").is_dir()
    assert not (tmp_path / cgroupfiles.STATE_FILE).exists()


# --- cgroup v2: the file-writing logic against a fake tree (no real v2 controllers here)

V2_FILES = {"cgroup.procs": "", "cgroup.controllers": "cpuset cpu memory",
            "cgroup.subtree_control": "", "cpu.max": "max 100000", "cpu.stat": "",
            "cpuset.cpus": "", "cpuset.mems": "", "cpuset.cpus.effective": "0-1",
            "cpuset.mems.effective": "0", "memory.max": "max", "memory.swap.max": "max",
            "memory.current": "0", "memory.peak": "0", "memory.events": ""}


def fake_dir(path: Path) -> None:
    """What the kernel does on mkdir in a v2 hierarchy: the interface files appear."""
    path.mkdir()
    for name, text in V2_FILES.items():
        (path / name).write_text(text)


@pytest.fixture
def fake_v2(tmp_path, monkeypatch):
    mount = tmp_path / "unified"
    mount.mkdir()
    for name, text in V2_FILES.items():
        (mount / name).write_text(text)
    fake_dir(mount / "lab")                       # the creating process's own cgroup
    (tmp_path / "mountinfo").write_text(
        f"41 31 0:38 / {mount} rw,relatime - cgroup2 cgroup2 rw\n"
        "32 31 0:29 / /x/cpu rw,relatime - cgroup cgroup rw,hugetlb\n")
    (tmp_path / "cgroup").write_text("1:hugetlb:/\n0::/lab\n")
    monkeypatch.setattr(cgroups, "_make_dir", fake_dir)
    state = tmp_path / "state"
    state.mkdir()
    return mount, detect(tmp_path / "mountinfo", tmp_path / "cgroup"), state


def test_v2_group_writes_its_limits_and_enables_controllers(fake_v2, tmp_path, monkeypatch):
    mount, found, state = fake_v2
    assert {c: (h.version, h.own) for c, h in found.items()} == {
        "cpuset": (2, "/lab"), "cpu": (2, "/lab"), "memory": (2, "/lab"), "hugetlb": (1, "/")}
    g = create_group("v2fake", state, Profile(cpus=1, cpu_quota=0.5, memory_mb=64), found)
    d = mount / "lab" / "stacklab-v2fake"
    assert [(p.dir, p.controllers) for p in g.places] == [(d, ("cpuset", "cpu", "memory"))]
    assert cgroups._records(state) == [str(d)]
    for level in (mount, mount / "lab"):
        assert (level / "cgroup.subtree_control").read_text() == "+cpuset +cpu +memory"
    assert {f: (d / f).read_text() for f in ("cpu.max", "cpuset.cpus", "cpuset.mems",
                                             "memory.max", "memory.swap.max")} == {
        "cpu.max": "50000 100000", "cpuset.cpus": "0", "cpuset.mems": "0",
        "memory.max": "67108864", "memory.swap.max": "0"}

    g.preexec()()                                 # what the child runs before exec
    assert (d / "cgroup.procs").read_text() == str(os.getpid())
    proc = tmp_path / "proc"
    (proc / "77").mkdir(parents=True)
    (proc / "77" / "cgroup").write_text("0::/lab/stacklab-v2fake\n")
    monkeypatch.setattr(cgroups, "PROC", proc)
    ok, detail = g.verify(77)
    assert ok and "cpu.max=50000 100000" in detail, detail
    (d / "memory.max").write_text("max")
    (proc / "77" / "cgroup").write_text("0::/lab\n")
    ok, detail = g.verify(77)
    assert not ok and "is in /lab for cpuset,cpu,memory" in detail
    assert "memory.max reads 'max', was set to '67108864'" in detail

    (d / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n"
                                "nr_periods 10\nnr_throttled 4\nthrottled_usec 250000\n")
    (d / "memory.peak").write_text("5000000\n")
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert g.usage() == {"cpu_usage_s": 1.5, "cpu_periods": 10, "cpu_throttled_periods": 4,
                         "cpu_throttled_s": 0.25, "memory_current_bytes": 0,
                         "memory_peak_bytes": 5000000, "memory_limit_hits": 3,
                         "memory_oom_kills": 1}
    with pytest.raises(CgroupBusyError, match=f"pids {os.getpid()}"):
        g.close(grace_s=0.1)
    assert cgroups._records(state) == [str(d)]


def test_v2_leaves_enabled_controllers_alone(fake_v2):
    mount, found, state = fake_v2
    for level in (mount, mount / "lab"):
        (level / "cgroup.subtree_control").write_text("cpu memory")
    create_group("v2quota", state, Profile(cpu_quota=0.5), found)
    for level in (mount, mount / "lab"):
        assert (level / "cgroup.subtree_control").read_text() == "cpu memory"


def test_a_missing_controller_is_named(fake_v2):
    _, found, state = fake_v2
    del found["cpu"]
    with pytest.raises(cgroups.CgroupError, match="cpu_quota=0.5 needs the cpu cgroup"):
        create_group("nocpu", state, Profile(cpu_quota=0.5), found)
    assert not (state / cgroupfiles.STATE_FILE).exists()
