import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stacklab.host import lab, procs
from stacklab.netlab.sweep import SWEEPS

from stacklab.stacks import COMPONENTS, REGISTRY, STACKS, StackDef, build_registry
from stacklab.workloads import WORKLOADS

from dummy_component import PyHttp
from fakes import FakeProcesses


PR_SET_CHILD_SUBREAPER = 36


def pytest_configure(config):
    """The test run becomes a child subreaper (Linux): a server orphaned by a stacklab
    command a test ran stays a descendant of this process, which is how leftover checks
    (helpers.server_processes) tell this run's servers from other stacklab runs'."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


# What a test may start only when marked `integration` (real servers, the real engine,
# a browser, load tools): `make check` runs the rest, in minutes. The dummy component
# (python3 -m http.server) and the fake engine (tests/fake_engine) are not real parts.
REAL_PROGRAMS = frozenset({
    "nginx", "apache2", "php-fpm8.2", "php-cgi8.2", "mariadbd", "mysqld",
    "mariadb-install-db", "mysql_install_db", "varnishd", "lighttpd", "squid", "haproxy",
    "memcached", "caddy", "chromium", "chromium-browser", "wrk", "ab", "h2load"})
REAL_ENGINE = (Path(__file__).resolve().parent.parent / "engine" / "target" / "release"
               / "stacklab-load")
# A real program asked only what it is or whether a config holds (`nginx -v`, `apache2
# -t`, `mariadbd --verbose --help`) answers in milliseconds and serves nothing.
PROBES = frozenset({"-v", "-V", "-t", "-T", "-M", "-m", "-i", "-h", "--version", "--help",
                    "-version", "-help", "--test", "-tt"})


def real_program(args) -> str | None:
    """The real part a command line starts (a probe of it is none), or None."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args or [])
    if not argv:
        return None
    first = os.fsdecode(argv[0])
    if not os.path.isabs(first):
        first = shutil.which(first) or first
    name = os.path.basename(first)
    probe = bool(PROBES & {os.fsdecode(a) for a in argv[1:]})
    if name in REAL_PROGRAMS:
        return None if probe else name
    if name == "stacklab-load" and os.path.realpath(first) == str(REAL_ENGINE):
        return None if probe else "the real engine"
    return None


@pytest.fixture(autouse=True)
def _real_parts_only_in_integration(request, monkeypatch):
    """A test not marked `integration` that starts a real part fails at once, naming it:
    the fast tier (`make check`) stays fast, and a test that needs a server says so."""
    if request.node.get_closest_marker("integration"):
        yield
        return
    started = subprocess.Popen.__init__
    tried: list[str] = []

    def guarded(self, args, *rest, **kw):
        if (program := real_program(args)) is not None:
            tried.append(program)
            raise AssertionError(f"{request.node.nodeid} starts {program}: mark it "
                                 "@pytest.mark.integration (make check leaves it out)")
        started(self, args, *rest, **kw)
    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)
    yield
    if tried:       # said here too: a command the test ran may have caught the error
        pytest.fail(f"starts {', '.join(sorted(set(tried)))}: mark it "
                    "@pytest.mark.integration (make check leaves it out)", pytrace=False)


@pytest.fixture
def spec_args():
    """What load_spec/parse_spec need besides the document."""
    return REGISTRY, STACKS, set(WORKLOADS)


def _lab_session():
    s = lab.open_session(sweeps=SWEEPS)
    yield s
    s.close()


@pytest.fixture
def session():
    """A lab session (run directories under /tmp/stacklab-<uid>), closed afterwards."""
    yield from _lab_session()


@pytest.fixture(scope="module")
def module_session():
    """One lab session for a module's tests: what its cache holds (a seeded datadir, a
    deployed application) is made once. A module takes it as its `session` with
    `session = shared_session()` (helpers.py)."""
    yield from _lab_session()


@pytest.fixture
def registered(monkeypatch):
    """The dummy component (tests/dummy_component: python3 -m http.server) registered by
    the one registry line, as stacks/__init__.py has it: the component in COMPONENTS and
    its stack as a StackDef; REGISTRY is then built from them by the registry's own
    build_registry (in place: the modules that imported it see the same object)."""
    component = PyHttp()
    monkeypatch.setitem(COMPONENTS, component.name, component)
    monkeypatch.setitem(STACKS, "py-http", StackDef(
        "py-http", ("py-http",), "Python's http.server serving files itself"))
    monkeypatch.setattr(REGISTRY, "knobs", build_registry().knobs)
    return component


@pytest.fixture
def fake_processes():
    """Servers started in this test are FakeProcesses' placeholders (tests/fakes.py)."""
    with procs.started_by(FakeProcesses()) as fake:
        yield fake
    for started in fake.started:          # a test that failed midway leaves none running
        if started.pid is not None and procs.group_members(started.pid):
            procs.stop_group(started.pid, grace_s=1.0)
