"""A server not ready in time on a busy host says the host was busy (issue 39: "nginx not
ready after 15 s" on a host running other work said nothing of it): others' CPU over the
readiness wait, less the starting server's own, or the load average against the host's
cores."""

import pytest

from stacklab.errors import StackError
from stacklab.measure.monitor import CpuMark, cpu_mark, others_cores
from stacklab.stacks import base

from dummy_component import PyHttp
from test_fake_processes import KNOBS, context

MARK = CpuMark(0.0, (0.0, 0.0, 0.0, 0, 0.0, 0.0, 2), 0.0)    # a host of 2 cores


@pytest.mark.parametrize("others, load, said", [
    (1.6, 3.4, "; the host was busy meanwhile: 1.60 cores of other work of its 2 (load "
               "average 3.40), which can delay a server's start"),
    (0.7, 0.9, "; the host was busy meanwhile: 0.70 cores of other work of its 2 (load "
               "average 0.90), which can delay a server's start"),
    (0.1, 2.5, "; the host was busy meanwhile: 0.10 cores of other work of its 2 (load "
               "average 2.50), which can delay a server's start"),
    (0.2, 1.2, ""),
])
def test_a_busy_host_is_said_quiet_one_is_not(others, load, said):
    seen = []

    def reading(mark, server_s):
        seen.append(server_s)
        return others
    assert base.busy_host(MARK, 0.4, others=reading, load=lambda: (load, 0, 0)) == said
    assert seen == [0.4]        # the starting server's own CPU is not others' work


def test_others_work_leaves_out_this_process_and_the_server(monkeypatch):
    """Two cores, 10 s: 5 s idle leaves 15 s busy; 1 s of it this process's, 2 s the
    server's: 1.2 cores of others' work."""
    start = CpuMark(100.0, (0.0, 0.0, 0.0, 0, 0.0, 0.0, 2), 3.0)
    now = CpuMark(110.0, (15.0, 0.0, 0.0, 0, 0.0, 5.0, 2), 4.0)
    monkeypatch.setattr("stacklab.measure.monitor.cpu_mark", lambda: now)
    assert others_cores(start, mine_s=2.0) == pytest.approx(1.2)
    assert others_cores(start, mine_s=50.0) == 0.0


def test_a_readiness_timeout_carries_what_the_host_did(tmp_path, fake_processes, monkeypatch):
    marks = []

    def busy(mark, server_s):
        marks.append(mark)
        return "; the host was busy meanwhile: 1.90 cores of other work of its 2"
    monkeypatch.setattr(base, "busy_host", busy)
    with pytest.raises(StackError, match=r"^py-http not ready on 127\.0\.0\.1:\d+ after "
                                         r"0\.5 s \(1 of 1 configured processes\); the "
                                         r"host was busy meanwhile: 1\.90 cores"):
        PyHttp().start(context(tmp_path), KNOBS, ready_timeout_s=0.5)
    [mark] = marks
    assert isinstance(mark, CpuMark) and mark.read_s <= cpu_mark().read_s
