import pytest

from stacklab.stacks import REGISTRY, STACKS
from stacklab.workloads import WORKLOADS


@pytest.fixture
def spec_args():
    """What load_spec/parse_spec need besides the document."""
    return REGISTRY, set(STACKS), set(WORKLOADS)
