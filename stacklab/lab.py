"""The lab directory: where run directories live while servers run.

It is under the system temp dir (not the results dir) so that a server that drops to
www-data can read its docroot. Each stacklab process holds a lock on its own session
directory; a session directory whose lock is free belongs to a crashed stacklab, and
its servers and files are cleaned up at the next start.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import stat
import re
import shutil
import signal
import string
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import procs
from .errors import UnsafePathError
# What a lab root may not hold: one list for the server configs and the filesystem layer
# (fscheck refuses the same characters when it mounts), so a root accepted here is never
# refused when the session closes. Templates quote paths; this refuses them early.
from .netlab.fscheck import UNSAFE, unsafe_char  # noqa: F401 (UNSAFE re-exported)

LOCK = "lock"

# The names of what the lab creates: templates whose fields have a fixed shape. A name is
# made here (`name`) and matched here (`pattern`: export-config cleans rendered configs of
# lab paths), from one definition, so that the two cannot drift apart.
ROOT = "stacklab-{uid}"                # the lab root, in the system temp dir
SESSION = "s-{pid}-{token}"            # one stacklab process's session directory
RUN = "{trial_id}-r{repetition}"       # one run's servers, in its session
DOCROOT = "docroot-{workload}"         # a deployed workload, shared by a session's runs
CACHE = "cache"                        # kept for the whole session (seeded datadirs)
FIELDS = {"uid": r"\d+", "pid": r"\d+", "token": r"[0-9a-f]{8}",
          "trial_id": r"[0-9a-f]{12}",                  # plan.Trial's id
          "repetition": r"\d+", "workload": r"[^/\s\"':;|]+"}


def name(template: str, **values: object) -> str:
    """The name `template` gives these field values: name(RUN, trial_id=…, repetition=2)."""
    return template.format(**values)


def pattern(template: str) -> str:
    """A regular expression matching every name `template` makes (each field in its shape)."""
    return "".join(re.escape(literal) + (f"(?:{FIELDS[field]})" if field else "")
                   for literal, field, _, _ in string.Formatter().parse(template))


def run_name(trial_id: str, repetition: int) -> str:
    """The directory of one run: its servers' configs and logs while they run, and where
    its logs are kept afterwards."""
    return name(RUN, trial_id=trial_id, repetition=repetition)


def free_mib(path: Path) -> float:
    """Space left for an unprivileged writer on the filesystem of `path`, in MiB."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**20


def default_root() -> Path:
    return Path(tempfile.gettempdir()) / name(ROOT, uid=os.getuid())


def server_user() -> tuple[str | None, str | None]:
    """As root, servers drop to www-data (Apache refuses to run as root); else nobody."""
    if os.getuid() != 0:
        return None, None
    try:
        pwd.getpwnam("www-data")
        return "www-data", "www-data"
    except KeyError:
        return "nobody", "nogroup"


@dataclass
class Session:
    root: Path
    dir: Path
    _lock_fd: int

    def layer_id(self, run: str) -> str:
        """The id a run's namespaces, filesystem and cgroup are named by: the run's name
        and this session's token, so two labs running the same spec never share one."""
        return f"{self.dir.name.rsplit('-', 1)[-1]}-{run}"

    def run_dir(self, name: str) -> Path:
        path = self.dir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def docroot(self, workload: str) -> Path:
        """Where `workload` is deployed, once for all of the session's runs."""
        return self.run_dir(name(DOCROOT, workload=workload))

    def cache(self) -> Path:
        """What outlives a run: seeded database datadirs."""
        return self.run_dir(CACHE)

    def close(self) -> None:
        """Stop anything still running from this session (a safety net: runs stop their
        own servers), then remove its files."""
        _stop_recorded(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.close(self._lock_fd)


def check_root(root: Path) -> Path:
    """The lab root, or UnsafePathError naming it and what is wrong: the first character
    a config or a mount cannot hold, or a directory above it the servers cannot search."""
    bad = unsafe_char(str(root))
    if bad is not None:
        raise UnsafePathError(f"lab root {str(root)!r} (from TMPDIR) contains {bad!r}, which "
                              "server configs and mounts cannot hold safely: set TMPDIR to a "
                              "plain directory")
    _check_searchable(root)
    return root


def _check_searchable(root: Path) -> None:
    """Every directory above the root must be searchable by the servers' user (www-data
    when root), or each server answers 403 or exits 255 on a docroot it cannot reach.
    The root itself is made 0755 by open_session; its parents are the user's."""
    user, _ = server_user()
    for directory in reversed(root.parents):
        try:
            st = directory.stat()
        except OSError:
            return                           # made later by open_session, 0755
        if not _can_search(st, user):
            who = user or pwd.getpwuid(os.getuid()).pw_name
            mode = oct(stat.S_IMODE(st.st_mode))[2:].zfill(4)
            raise UnsafePathError(f"lab root {str(root)!r} (from TMPDIR): {str(directory)!r} "
                                  f"has mode {mode}, which the servers' user {who} cannot "
                                  f"search: chmod o+x {str(directory)!r}, or set TMPDIR to "
                                  "a directory every user can search (such as /tmp)")


def _can_search(st: os.stat_result, user: str | None) -> bool:
    """Whether `user` (None: this process) may search a directory of this stat, by its
    owner, group and other bits (as the kernel decides without ACLs)."""
    if user is None:
        uid, gids = os.getuid(), {os.getgid(), *os.getgroups()}
    else:
        entry = pwd.getpwnam(user)
        uid, gids = entry.pw_uid, set(os.getgrouplist(user, entry.pw_gid))
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in gids:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def open_session(root: Path | None = None) -> Session:
    root = check_root(root or default_root())
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    root.chmod(0o755)
    cleanup_stale(root)
    pid, token = os.getpid(), uuid.uuid4().hex[:8]
    staging = root / f"new-{pid}-{token}"   # locked before it gets a name cleanup looks at
    staging.mkdir(mode=0o755)
    fd = os.open(staging / LOCK, os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    path = root / name(SESSION, pid=pid, token=token)
    staging.rename(path)
    return Session(root, path, fd)


def cleanup_stale(root: Path) -> list[Path]:
    """Stop the servers of, and remove, session dirs that no live stacklab holds."""
    cleaned = []
    for session in sorted(root.glob("s-*")):
        lock = session / LOCK
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            fd = None
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue   # a live stacklab owns it
            _stop_recorded(session)
            shutil.rmtree(session, ignore_errors=True)
            cleaned.append(session)
        finally:
            if fd is not None:
                os.close(fd)
    return cleaned


def other_labs(session: Session) -> list[dict]:
    """Live stacklab sessions on this machine other than `session` (any user's lab
    directory): two labs measuring at once measure each other."""
    roots = {session.root, *Path(tempfile.gettempdir()).glob("stacklab-[0-9]*")}
    found = []
    for directory in sorted(d for root in roots for d in root.glob("s-*")):
        if directory == session.dir:
            continue
        try:
            fd = os.open(directory / LOCK, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:       # held: a live stacklab's session
            pid = directory.name.split("-")[1]
            found.append({"pid": int(pid) if pid.isdigit() else None, "dir": str(directory)})
        finally:
            os.close(fd)
    return found


def _stop_recorded(directory: Path) -> None:
    """Stop the servers recorded under a session left behind, then remove the lab layers
    it recorded: network namespaces, filesystems and cgroups (the servers first: their
    sockets, open files and pids are there)."""
    from .netlab import cgroups, fs, net
    for pgids in directory.rglob(procs.PGIDS_FILE):
        procs.cleanup_leftovers(pgids.parent)
    net.cleanup_stale(directory)
    fs.cleanup_stale(directory)
    cgroups.cleanup_stale(directory)


# Interrupts that arrived inside interrupts_held(), raised when it ends.
_held = {"depth": 0, "pending": False}


def _interrupt(signum, frame):
    if _held["depth"]:
        _held["pending"] = True
        return
    raise KeyboardInterrupt


@contextmanager
def interrupts_held():
    """Ctrl-C, SIGTERM and SIGHUP wait until the block ends, then interrupt as usual: a
    process started inside is known to its caller (Popen has returned) before the
    interrupt lands, so it can be stopped. (Popen interrupted between fork and return
    leaves a child nobody knows.) Inside a session_scope only; elsewhere a no-op."""
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if not _held["depth"] and _held["pending"]:
            _held["pending"] = False
            raise KeyboardInterrupt


@contextmanager
def session_scope(root: Path | None = None):
    """A lab session whose servers are stopped however the command ends: Ctrl-C, SIGTERM
    and SIGHUP become KeyboardInterrupt (held inside interrupts_held()), and while the
    session is being closed they are ignored, so cleanup always finishes."""
    previous = {sig: signal.signal(sig, _interrupt)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        session = open_session(root)
        try:
            yield session
        finally:
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            session.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
