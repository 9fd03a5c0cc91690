"""The lab directory: where run directories live while servers run.

It is under the system temp dir (not the results dir) so that a server that drops to
www-data can read its docroot. Each stacklab process holds a lock on its own session
directory; a session directory whose lock is free belongs to a crashed stacklab, and
its servers and files are cleaned up at the next start.

Unix sockets do not live in the lab root: a socket's path holds at most 107 bytes, and a
run directory under a long TMPDIR holds more. Each session registers in one short
machine-wide directory (the registry: /run/stacklab as root), whatever its TMPDIR; its
entry holds its servers' sockets and names its session directory, so that any later
start sweeps a session killed under another root, and any lab sees every other.

What a session leaves besides servers and files (the lab layers' namespaces, filesystems
and cgroups, recorded under its directory) this module does not know: whoever opens a
session names the sweeps that remove them (netlab.sweep.SWEEPS), and every sweep of a
dead session runs them after its servers are stopped.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pwd
import stat
import re
import shutil
import signal
import string
import tempfile
import uuid
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import procs
from ..errors import UnsafePathError
# Held by drive.py around the engine's start, below this module; read as lab.<name> too.
from .interrupts import interrupt, interrupts_held  # noqa: F401 (interrupts_held re-exported)
# What a lab root may not hold: one list for the server configs and the filesystem layer
# (netlab.fscheck refuses the same characters when it mounts), so a root accepted here is
# never refused when the session closes. Templates quote paths; this refuses them early.
from .pathchars import unsafe_char

LOCK = "lock"
SUN_PATH_MAX = 107          # bytes of a unix socket's path (sun_path, less its NUL)

# The names of what the lab creates: templates whose fields have a fixed shape. A name is
# made here (`name`) and matched here (`pattern`: export-config cleans rendered configs of
# lab paths), from one definition, so that the two cannot drift apart.
ROOT = "stacklab-{uid}"                # the lab root, in the system temp dir
SESSION = "s-{pid}-{token}"            # one stacklab process's session directory
RUN = "{trial_id}-r{repetition}"       # one run's servers, in its session
DOCROOT = "docroot-{workload}"         # a deployed workload, shared by a session's runs
CACHE = "cache"                        # kept for the whole session (seeded datadirs)
# The registry: one short directory per machine and user, never under TMPDIR.
REGISTRY_AS_ROOT = Path("/run/stacklab")
REGISTRY = "stacklab-run-{uid}"        # in /tmp, for a user who cannot write /run
ENTRY = "{pid}-{token}"                # one live session's entry: its lock and sockets
SOCKET_DIR = "{digest}-{label}"        # in an entry: one run directory's sockets
ENTRY_SESSION = "session"              # in an entry: the path of its session directory
SESSION_ENTRY = "sockets"              # in a session directory: the path of its entry
FIELDS = {"uid": r"\d+", "pid": r"\d+", "token": r"[0-9a-f]{8}",
          "trial_id": r"[0-9a-f]{12}",                  # plan.Trial's id
          "repetition": r"\d+", "workload": r"[^/\s\"':;|]+",
          "digest": r"[0-9a-f]{8}",                     # of the run dir's path in its session
          "label": r"[^/\s\"':;|]+"}                      # the run dir's name (its component)

# Removes the lab layers a dead session recorded under a directory (its state records):
# one per kind of layer, given by whoever opens the session (netlab.sweep.SWEEPS).
Sweep = Callable[[Path], object]


def name(template: str, **values: object) -> str:
    """The name `template` gives these field values: name(RUN, trial_id=…, repetition=2)."""
    return template.format(**values)


def pattern(template: str, *captured: str) -> str:
    """A regular expression matching every name `template` makes (each field in its shape;
    those `captured` as named groups)."""
    def shape(field: str) -> str:
        return f"(?P<{field}>{FIELDS[field]})" if field in captured else f"(?:{FIELDS[field]})"
    return "".join(re.escape(literal) + (shape(field) if field else "")
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
    entry: Path | None = None      # its registry entry (sockets), held by _entry_fd
    _entry_fd: int | None = None
    sweeps: tuple[Sweep, ...] = ()  # what removes the lab layers it may leave behind

    def layer_id(self, run: str) -> str:
        """The id a run's namespaces, filesystem and cgroup are named by: the run's name
        and this session's token, so two labs running the same spec never share one."""
        return f"{self.dir.name.rsplit('-', 1)[-1]}-{run}"

    def run_dir(self, name: str) -> Path:
        path = self.dir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def docroot(self, workload: str) -> Path:
        """Where `workload` is deployed, once for all of the session's runs (a name with
        a path in it, dir:/home/me/site, gives a flat name: its tail and a digest)."""
        if not re.fullmatch(r"[\w.:+-]+", workload):
            digest = hashlib.sha256(workload.encode()).hexdigest()[:8]
            workload = re.sub(r"[^\w.+-]+", "_", workload)[-40:].strip("_") + "-" + digest
        return self.run_dir(name(DOCROOT, workload=workload))

    def cache(self) -> Path:
        """What outlives a run: seeded database datadirs."""
        return self.run_dir(CACHE)

    def close(self) -> None:
        """Stop anything still running from this session (a safety net: runs stop their
        own servers), then remove its lab layers and its files."""
        _stop_recorded(self.dir, self.sweeps)
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.entry is not None:
            shutil.rmtree(self.entry, ignore_errors=True)
            os.close(self._entry_fd)
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


def open_session(root: Path | None = None, registry: Path | None = None, *,
                 sweeps: Sequence[Sweep]) -> Session:
    """A locked session directory under `root`, registered in `registry` (default: this
    user's machine-wide one), after sweeping the sessions no live stacklab holds. `sweeps`
    remove the lab layers such a session left, and this one's when it closes: a session
    opened without them (a test's servers alone) removes a dead session's records with
    its directory, so a lab that makes layers opens with netlab.sweep.SWEEPS."""
    root = check_root(root or default_root())
    registry = check_registry(registry or default_registry())
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    root.chmod(0o755)
    cleanup_stale(root, registry, sweeps=sweeps)
    pid, token = os.getpid(), uuid.uuid4().hex[:8]
    staging = root / f"new-{pid}-{token}"   # locked before it gets a name cleanup looks at
    staging.mkdir(mode=0o755)
    fd = _lock_new(staging / LOCK)
    path = root / name(SESSION, pid=pid, token=token)
    staging.rename(path)
    entry, entry_fd = _register(registry, path, pid, token)
    return Session(root, path, fd, entry, entry_fd, tuple(sweeps))


def _lock_new(lock: Path) -> int:
    """A new lock file, held (LOCK_EX) for as long as this process lives; readable by all,
    so that other users' labs can see it is held."""
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


# 1. the registry: short, machine-wide ---------------------------------------------------

def default_registry() -> Path:
    """/run/stacklab as root (short, and gone at reboot with what it names); else
    /tmp/stacklab-run-<uid>. Never under TMPDIR: its length is what it must not depend on."""
    if os.getuid() == 0 and os.access("/run", os.W_OK):
        return REGISTRY_AS_ROOT
    return Path("/tmp") / name(REGISTRY, uid=os.getuid())


def registries() -> list[Path]:
    """Every user's registry on this machine, whatever TMPDIR each lab runs under."""
    found = [REGISTRY_AS_ROOT, *(r for r in sorted(Path("/tmp").glob("stacklab-run-*"))
                                 if re.fullmatch(pattern(REGISTRY), r.name))]
    return [r for r in found if r.is_dir()]


def check_registry(registry: Path) -> Path:
    """The registry, made if missing; UnsafePathError if it is not a directory of ours
    that no one else may write (in /tmp anyone could have made it first)."""
    try:
        registry.mkdir(mode=0o755)
        registry.chmod(0o755)
    except FileExistsError:
        pass
    except OSError as e:
        raise UnsafePathError(f"lab socket registry {str(registry)!r} cannot be made: "
                              f"{e.strerror}") from None
    st = registry.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        mode = oct(stat.S_IMODE(st.st_mode))[2:].zfill(4)
        raise UnsafePathError(f"lab socket registry {str(registry)!r} is not a directory of "
                              f"this user's that only it can write (owner uid {st.st_uid}, "
                              f"mode {mode}): remove it")
    return registry


def _register(registry: Path, session_dir: Path, pid: int, token: str) -> tuple[Path, int]:
    """The session's entry in the registry, locked before it gets a name a sweep looks
    at, naming the session directory (and named by it, for socket_path)."""
    staging = registry / f"new-{name(ENTRY, pid=pid, token=token)}"
    staging.mkdir(mode=0o755)
    staging.chmod(0o755)
    fd = _lock_new(staging / LOCK)
    (staging / ENTRY_SESSION).write_text(str(session_dir))
    entry = registry / name(ENTRY, pid=pid, token=token)
    staging.rename(entry)
    (session_dir / SESSION_ENTRY).write_text(str(entry))
    return entry, fd


def socket_path(run_dir: Path, filename: str, server: str, limit: int = SUN_PATH_MAX) -> Path:
    """Where a server of `run_dir` binds its unix socket `filename`: in the run directory
    (with its configs and logs) when the path fits the `limit` bytes `server` can bind,
    else in a short directory of the session's registry entry (one per run directory),
    whatever the length of TMPDIR. Refused in one line if it fits neither (a run
    directory outside any session: a config rendered alone)."""
    path = run_dir / filename
    if len(os.fsencode(path)) <= limit:
        return path
    if (directory := _short_dir(run_dir)) is not None:
        path = directory / filename
    check_socket(path, server, limit)
    return path


def short_path(run_dir: Path, filename: str, server: str, limit: int) -> Path:
    """run_dir/filename as `server` can be told it in `limit` bytes: itself when it fits,
    else a symlink to it in the run's short directory of the registry (as socket_path's).
    mod_fcgid cuts each FcgidInitialEnv value at 127 bytes: PHPRC and PHP_INI_SCAN_DIR
    under a long TMPDIR would name no file, and PHP would run without the run's php.ini.
    Refused in one line if it fits neither."""
    path = run_dir / filename
    if len(os.fsencode(path)) <= limit:
        return path
    if (directory := _short_dir(run_dir)) is not None:
        link = directory / filename
        link.unlink(missing_ok=True)
        link.symlink_to(path)
        if len(os.fsencode(link)) <= limit:
            return link
    size = len(os.fsencode(path))
    raise UnsafePathError(f"{server}: path {str(path)!r} is {size} bytes, over the {limit} "
                          f"bytes {server} can take: use a shorter lab directory (TMPDIR)")


def _short_dir(run_dir: Path) -> Path | None:
    """The run's short directory in its session's registry entry (made, 0755: the
    servers' user reaches what is in it); None for a run directory outside any session."""
    session = next((d for d in (run_dir, *run_dir.parents)
                    if re.fullmatch(pattern(SESSION), d.name)), None)
    if session is None or not (session / SESSION_ENTRY).is_file():
        return None
    entry = Path((session / SESSION_ENTRY).read_text())
    digest = hashlib.sha256(str(run_dir.relative_to(session)).encode()).hexdigest()
    directory = entry / name(SOCKET_DIR, digest=digest[:8], label=run_dir.name[:24])
    directory.mkdir(mode=0o755, exist_ok=True)
    directory.chmod(0o755)
    return directory


def check_socket(path: Path, server: str, limit: int = SUN_PATH_MAX) -> None:
    """UnsafePathError naming a socket path longer than `server` can bind."""
    size = len(os.fsencode(path))
    if size > limit:
        raise UnsafePathError(f"{server}: unix socket path {str(path)!r} is {size} bytes, "
                              f"over the {limit} bytes {server} can bind: use a shorter lab "
                              "directory (TMPDIR)")


# 2. sweeping what dead sessions left -------------------------------------------------

def cleanup_stale(root: Path, registry: Path | None = None, *,
                  sweeps: Sequence[Sweep]) -> list[Path]:
    """Stop the servers of, and remove, session dirs that no live stacklab holds: those
    under `root`, and those the registry names under any other root (a stacklab killed
    under another TMPDIR), with their registry entries; `sweeps` remove their lab layers."""
    cleaned = []
    for session in sorted(root.glob("s-*")):
        with _lock_if_free(session / LOCK) as free:
            if free:
                _remove_session(session, sweeps)
                cleaned.append(session)
    return cleaned + sweep_registry(registry or default_registry(), sweeps=sweeps)


def sweep_registry(registry: Path, *, sweeps: Sequence[Sweep]) -> list[Path]:
    """The registry's entries no live stacklab holds: their sessions' servers stopped,
    their lab layers removed (`sweeps`), their session directories and socket directories
    removed. Returns the session directories removed."""
    cleaned = []
    for entry in _entries(registry, staging=True):
        if not (entry / LOCK).exists() and procs.pid_alive(int(_pid_of(entry))):
            continue                         # being made right now: its lock comes next
        with _lock_if_free(entry / LOCK) as free:
            if not free:
                continue
            session = _recorded_session(entry)
            if session is not None:
                with _lock_if_free(session / LOCK) as session_free:
                    if not session_free:
                        continue             # its stacklab lives on: not ours to sweep
                    _remove_session(session, sweeps)
                    cleaned.append(session)
            shutil.rmtree(entry, ignore_errors=True)
    return cleaned


def _entries(registry: Path, staging: bool = False) -> list[Path]:
    """The registry's session entries (with `staging`, also those killed before they were
    named: new-<pid>-<token>)."""
    if not registry.is_dir():
        return []
    shape = ("(?:new-)?" if staging else "") + pattern(ENTRY)
    return [e for e in sorted(registry.iterdir()) if re.fullmatch(shape, e.name)]


def _pid_of(entry: Path) -> str:
    return entry.name.removeprefix("new-").split("-")[0]


def _remove_session(session: Path, sweeps: Sequence[Sweep]) -> None:
    _stop_recorded(session, sweeps)
    shutil.rmtree(session, ignore_errors=True)


@contextmanager
def _lock_if_free(lock: Path):
    """True inside the block if no live stacklab holds `lock` (held by us meanwhile, so
    that no one else sweeps it too); a missing lock file is free (killed making it), one
    we may not open is not ours to sweep."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        fd = None
    except OSError:
        fd = -1
    try:
        yield fd is None or (fd >= 0 and _take(fd))
    finally:
        if fd is not None and fd >= 0:
            os.close(fd)


def _take(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _recorded_session(entry: Path) -> Path | None:
    """The session directory an entry names, if it exists and is one by its name: a lab
    root's s-<pid>-<token> with the entry's own pid and token, and no unsafe character."""
    try:
        path = Path((entry / ENTRY_SESSION).read_text())
    except (OSError, UnicodeDecodeError):
        return None
    expected = "s-" + entry.name.removeprefix("new-")
    if (path.is_absolute() and path.name == expected and unsafe_char(str(path)) is None
            and ".." not in path.parts and path.is_dir()):
        return path
    return None


# 3. other labs, machine-wide ------------------------------------------------------

def other_labs(session: Session) -> list[dict]:
    """Live stacklab sessions on this machine other than `session` (any user's, under
    any TMPDIR: the registries name them all): two labs measuring at once measure each
    other."""
    roots = {session.root, *Path(tempfile.gettempdir()).glob("stacklab-[0-9]*")}
    found: dict[str, dict] = {}
    for directory in sorted(d for root in roots for d in root.glob("s-*")):
        if directory != session.dir and _is_held(directory / LOCK):
            found[str(directory)] = _lab(directory, directory.name.split("-")[1])
    extra = [session.entry.parent] if session.entry is not None else []
    for registry in dict.fromkeys([*registries(), *extra]):
        for entry in _entries(registry):
            if entry != session.entry and _is_held(entry / LOCK):
                directory = _recorded_session(entry) or entry
                if directory != session.dir:
                    found.setdefault(str(directory), _lab(directory, _pid_of(entry)))
    return list(found.values())


def _lab(directory: Path, pid: str) -> dict:
    return {"pid": int(pid) if pid.isdigit() else None, "dir": str(directory)}


def _is_held(lock: Path) -> bool:
    """Whether a live stacklab holds this lock (a shared lock cannot be had)."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _stop_recorded(directory: Path, sweeps: Sequence[Sweep]) -> None:
    """Stop the servers recorded under a session left behind, then remove the lab layers
    it recorded, each kind by its sweep in the order given (the servers first: their
    sockets, open files and pids are in those layers)."""
    for pgids in directory.rglob(procs.PGIDS_FILE):
        procs.cleanup_leftovers(pgids.parent)
    for sweep in sweeps:
        sweep(directory)


@contextmanager
def session_scope(root: Path | None = None, *, sweeps: Sequence[Sweep]):
    """A lab session whose servers are stopped however the command ends: Ctrl-C, SIGTERM
    and SIGHUP become KeyboardInterrupt (held inside interrupts_held()), and while the
    session is being closed they are ignored, so cleanup always finishes. `sweeps` as
    open_session's."""
    previous = {sig: signal.signal(sig, interrupt)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        session = open_session(root, sweeps=sweeps)
        try:
            yield session
        finally:
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            session.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
