import pytest

from stacklab import lab

from stacklab.stacks import REGISTRY, STACKS
from stacklab.workloads import WORKLOADS


@pytest.fixture
def spec_args():
    """What load_spec/parse_spec need besides the document."""
    return REGISTRY, set(STACKS), set(WORKLOADS)


@pytest.fixture
def session():
    """A lab session (run directories under /tmp/stacklab-<uid>), closed afterwards."""
    s = lab.open_session()
    yield s
    s.close()
