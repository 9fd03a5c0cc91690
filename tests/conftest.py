import ctypes

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
