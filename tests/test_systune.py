"""Keeping CPUs awake: held only while the experiment runs, and recorded."""

import os

from stacklab.host.systune import DMA_LATENCY, CpuAwake

from helpers import require_root


def test_cpu_dma_latency_is_held_only_inside():
    require_root(f"writes {DMA_LATENCY}")
    awake = CpuAwake()
    assert awake.state()["cpus_kept_awake"] is False
    with awake:
        assert awake.state()["cpus_kept_awake"] is True
        assert any(os.readlink(f"/proc/self/fd/{fd}") == str(DMA_LATENCY)
                   for fd in os.listdir("/proc/self/fd") if os.path.islink(f"/proc/self/fd/{fd}"))
    assert awake.state()["cpus_kept_awake"] is False


def test_state_names_the_idle_driver():
    state = CpuAwake().state()
    assert set(state) == {"cpuidle_driver", "cpuidle_governor", "cpus_kept_awake"}
