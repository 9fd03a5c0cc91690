import ctypes

import pytest

from stacklab.host import lab
from stacklab.netlab.sweep import SWEEPS

from stacklab.stacks import REGISTRY, STACKS
from stacklab.workloads import WORKLOADS


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


@pytest.fixture
def session():
    """A lab session (run directories under /tmp/stacklab-<uid>), closed afterwards."""
    s = lab.open_session(sweeps=SWEEPS)
    yield s
    s.close()
