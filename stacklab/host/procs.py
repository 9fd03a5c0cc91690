"""Server processes: start in their own process group, stop the whole group, leave nothing.

Every started group is written to the run directory's `pgids` file before anything
else happens, so a crashed stacklab's leftovers can be found and stopped next time.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

from .placement import pin


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (another user's counts: signalling it is refused,
    but it is there)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True

PGIDS_FILE = "pgids"
MARK = "STACKLAB_RUN_DIR"


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log_path: Path

    @property
    def pgid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None


@runtime_checkable
class PerComponent(Protocol):
    """A `join` that gives each component a cgroup of its own (netlab's run cgroup, which
    counts each component's CPU there): `preexec_for(run_dir)` makes or finds the group
    of the component started in run_dir and returns what its process runs before exec."""

    def preexec_for(self, run_dir: Path) -> Callable[[], None]: ...


class Runner(Protocol):
    """What starts a server's process: `subprocess.Popen` for real. The one seam between
    stacklab and the processes it starts, so that a test can stand a placeholder in for a
    server (tests/fakes.py, FakeProcesses) and see what would have run; everything
    around the start (the log, the pgids file, process groups, stop) stays real."""

    def __call__(self, name: str, argv: list[str], *, cwd: Path, env: dict[str, str],
                 **popen: Any) -> subprocess.Popen: ...


def _popen(name: str, argv: list[str], *, cwd: Path, env: dict[str, str],
           **popen: Any) -> subprocess.Popen:
    return subprocess.Popen(argv, cwd=cwd, env=env, **popen)


RUNNER: Runner = _popen


@contextmanager
def started_by(runner: Runner) -> Iterator[Runner]:
    """Server processes are started by `runner` inside the block (a test's fake), by
    `subprocess.Popen` again after it."""
    global RUNNER
    before, RUNNER = RUNNER, runner
    try:
        yield runner
    finally:
        RUNNER = before


def spawn(name: str, argv: list[str], run_dir: Path, log_path: Path,
          user: str | None = None, env: dict[str, str] | None = None,
          nofile: int | None = None, cpus: str = "",
          join: Callable[[], None] | None = None) -> Proc:
    """Start argv (never through a shell) in a new session; stdout/stderr go to log_path.
    `nofile` sets the open-files limit of the new process, `cpus` the CPUs it may use,
    `join` puts it into a cgroup first (the run's: a machine profile's, and the component's
    own, which counts the CPU of every process it starts, short-lived ones too)."""
    if isinstance(join, PerComponent):
        join = join.preexec_for(run_dir)
    log = open(log_path, "ab")
    preexec = _in_child(join, _nofile_limit(nofile) if nofile else None, pin(cpus))
    # Marks the process as this run's, for cleanup_leftovers after a crash.
    env = {**(os.environ if env is None else env), MARK: str(run_dir)}
    try:
        popen = RUNNER(
            name, argv, cwd=run_dir, env=env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True, user=user,
            group=_group_of(user), preexec_fn=preexec,
        )
    finally:
        log.close()
    # the binary that runs (a test's placeholder, if one stands in), for cleanup_leftovers
    with open(run_dir / PGIDS_FILE, "a") as f:
        f.write(f"{popen.pid} {popen.args[0]}\n")
    return Proc(name, popen, log_path)


def _in_child(*steps):
    """One preexec function running each step given (None when there is none)."""
    steps = [s for s in steps if s]
    if not steps:
        return None

    def run():
        for step in steps:
            step()
    return run


def _nofile_limit(nofile: int):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    return set_limit


# Descriptors the engine needs beyond one per connection (its own files, epoll, …);
# the same margin the engine asks for when it raises its limit.
ENGINE_FD_MARGIN = 64


def connections_problem(connections: int) -> str | None:
    """Why the engine cannot hold this many connections here (checked before anything
    starts: the engine can raise its soft open-files limit only up to the hard one)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    wanted = connections + ENGINE_FD_MARGIN
    if hard != resource.RLIM_INFINITY and wanted > hard:
        return (f"{connections} connections need about {wanted} open files, above this "
                f"machine's hard open-files limit ({hard}); raise it (ulimit -Hn) or use at "
                f"most {hard - ENGINE_FD_MARGIN}")
    return None


def _group_of(user: str | None) -> str | None:
    if user is None:
        return None
    import pwd
    import grp
    return grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name


def proc_stat(pid: int) -> list[bytes] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0], pgrp [2]).
    Plain os calls: the monitor reads this many times a second."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    return raw[raw.rfind(b")") + 2:].split()


def group_members(pgid: int) -> list[int]:
    """Pids of live processes whose process group is pgid (zombies excluded)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = proc_stat(int(entry))
            if fields and fields[0] != b"Z" and int(fields[2]) == pgid:
                members.append(int(entry))
    return members


def stop_group(pgid: int, grace_s: float = 5.0) -> None:
    """SIGTERM the group, wait up to grace_s for it to empty, then SIGKILL what is left."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            _reap(pgid)
            if not group_members(pgid):
                return
            time.sleep(0.05)


def _reap(pgid: int) -> None:
    try:
        while os.waitpid(-pgid, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def stop(proc: Proc, grace_s: float = 5.0) -> None:
    stop_group(proc.pgid, grace_s)
    try:
        proc.popen.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass


def cleanup_leftovers(run_dir: Path) -> list[int]:
    """Stop process groups recorded in a run directory by an earlier, crashed stacklab.

    A group is only signalled if one of its processes still runs the recorded binary
    from that run directory (command line or working directory), so a reused pid — a
    system daemon after a reboot, say — is never touched. Returns the groups stopped.
    """
    stopped = []
    try:
        text = (run_dir / PGIDS_FILE).read_text()
    except FileNotFoundError:     # none recorded, or its session is being removed now
        return stopped
    for line in text.splitlines():
        pid_s, _, binary = line.partition(" ")
        if not pid_s.isdigit() or not binary:
            continue                     # a line cut short by the crash
        pid = int(pid_s)
        members = group_members(pid)
        if members and _runs_binary(members, binary) and _belongs_to(members, run_dir):
            stop_group(pid)
            stopped.append(pid)
    return stopped


def _belongs_to(pids: list[int], run_dir: Path) -> bool:
    """One of the processes was started by stacklab for this run directory (the mark
    spawn() puts in its environment), or names that directory itself."""
    where = str(run_dir)
    mark = f"{MARK}={where}".encode()
    for pid in pids:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if mark in environ or where in cmdline:
            return True
    return False


def _runs_binary(pids: list[int], binary: str) -> bool:
    name = os.path.basename(binary)
    for pid in pids:
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        if exe == name or exe.startswith(name.split(".")[0]):
            return True
    return False


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
