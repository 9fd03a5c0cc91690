"""netlab's virtual hosts on the real kernel: two namespaces joined by a veth pair carry
HTTP, a tbf rate is measured as a rate, sysctls are per namespace or refused, the host's
interfaces and routes are untouched, and a kill -9 midway leaves nothing cleanup_stale
does not remove."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from stacklab.netlab import net, netkernel
from stacklab.netlab.run import link_rate

from helpers import require_root

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def root():
    require_root("network namespaces, veth pairs and tc")


def run_id() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


def lab_namespaces(rid: str = "") -> set[str]:
    return {ns for ns in net.namespaces() if ns.startswith(f"stacklab-{rid}")}


def host_network() -> dict:
    """The host's interfaces, addresses and routes, without what changes by itself
    (address lifetimes, counters)."""
    def ip(*args):
        return json.loads(subprocess.run(["ip", "-j", *args], capture_output=True, text=True,
                                         check=True, timeout=10).stdout)
    addrs = sorted((i["ifname"], tuple(i.get("flags", [])),
                    tuple(sorted(f"{a['local']}/{a['prefixlen']}" for a in i["addr_info"])))
                   for i in ip("addr", "show"))
    routes = sorted(json.dumps(r, sort_keys=True) for r in ip("route", "show", "table", "all"))
    return {"addrs": addrs, "routes": routes}


def sysctl_in(ns: str, key: str) -> str:
    return " ".join(subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-n", key],
                                   capture_output=True, text=True, check=True,
                                   timeout=10).stdout.split())


def host_sysctl(key: str) -> str:
    return " ".join(Path("/proc/sys", *key.split(".")).read_text().split())


def test_an_http_server_in_one_namespace_is_reached_from_the_other(root, tmp_path):
    before = host_network()
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "page.bin").write_bytes(os.urandom(200_000))
    rid = run_id()
    link = net.create_link(rid, tmp_path)
    server = None
    try:
        assert (tmp_path / f"netlab-{rid}.json").exists()
        assert lab_namespaces(rid) == {link.server_ns, link.client_ns}
        assert not any(i["ifname"].startswith("stl") for i in
                       json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True,
                                                 text=True, check=True).stdout)), \
            "a veth end is on the host"
        server = subprocess.Popen(
            link.exec_prefix(link.server_ns) + [sys.executable, "-m", "http.server", "8080",
                                                "--bind", link.server_addr,
                                                "--directory", str(docroot)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        start = link.counters()
        url = f"http://{link.server_addr}:8080/page.bin"
        deadline = time.monotonic() + 15
        while True:
            got = subprocess.run(link.exec_prefix(link.client_ns) + [
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", url],
                capture_output=True, text=True, timeout=10)
            if got.stdout == "200 200000" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert got.stdout == "200 200000", (got.stdout, got.stderr)
        end = link.counters()
        assert end["server"]["tx_bytes"] - start["server"]["tx_bytes"] >= 200_000
        assert end["client"]["rx_bytes"] - start["client"]["rx_bytes"] >= 200_000
        assert end["client"]["tx_packets"] > start["client"]["tx_packets"]
        route = json.loads(subprocess.run(["ip", "-j", "route", "get", link.server_addr],
                                          capture_output=True, text=True, check=True).stdout)
        assert not route[0]["dev"].startswith("stl")   # the host has no way into the link
    finally:
        if server:
            server.kill()
            server.wait()
        link.close()
    assert not lab_namespaces(rid)
    assert not (tmp_path / f"netlab-{rid}.json").exists()
    assert host_network() == before


def test_a_100mbit_link_moves_about_12_mb_per_second_and_an_unlimited_one_far_more(
        root, tmp_path):
    before = host_network()
    with net.create_link(run_id(), tmp_path, "100mbit") as shaped, \
            net.create_link(run_id(), tmp_path) as free:
        assert shaped.server_addr != free.server_addr      # two runs, two subnets
        # the fastest of up to three transfers, as a run judges its link: a busy host
        # only ever slows one
        (shaped_rate, _), free_rate = link_rate(shaped, "100mbit"), free.measure_rate()
        rtt = free.measure_rtt()
        qdisc = json.loads(subprocess.run(
            ["tc", "-n", shaped.client_ns, "-j", "qdisc", "show", "dev", shaped.client_dev],
            capture_output=True, text=True, check=True).stdout)
    assert 10e6 <= shaped_rate <= 13e6, shaped_rate
    assert free_rate > 50e6, free_rate
    assert 0 < rtt < 0.005, rtt
    assert qdisc[0]["kind"] == "tbf"                    # shaped both ways
    assert host_network() == before


def test_burst_holds_a_gso_packet_and_a_tick_of_the_rate():
    assert net.tbf_args("unlimited") == []
    assert net.tbf_args("100mbit")[:6] == ["root", "tbf", "rate", "100mbit", "burst",
                                           str(128 * 1024)]
    assert net.tbf_args("10gbit")[5] == str(10**10 // 8 // 250)


def test_a_namespaced_sysctl_takes_effect_inside_and_not_on_the_host(root, tmp_path):
    key = "net.ipv4.tcp_fin_timeout"
    host = host_sysctl(key)
    value = "17" if host != "17" else "18"
    with net.create_link(run_id(), tmp_path, sysctls={key: int(value)}) as link:
        assert sysctl_in(link.server_ns, key) == value
        assert sysctl_in(link.client_ns, key) != value     # the client keeps its own
        assert host_sysctl(key) == host
        net.set_sysctls(link.server_ns, {"net.ipv4.tcp_rmem": "4096 65536 1048576"})
        assert sysctl_in(link.server_ns, "net.ipv4.tcp_rmem") == "4096 65536 1048576"
        rmem_max = host_sysctl("net.core.rmem_max")
        with pytest.raises(ValueError, match="net.core.rmem_max is not per-namespace"):
            net.set_sysctls(link.server_ns, {"net.core.rmem_max": int(rmem_max) + 4096})
        assert host_sysctl("net.core.rmem_max") == rmem_max
        assert host_sysctl(key) == host


def test_a_link_asked_for_a_global_sysctl_is_refused_and_leaves_nothing(root, tmp_path):
    rid = run_id()
    with pytest.raises(ValueError, match="not per-namespace"):
        net.create_link(rid, tmp_path, sysctls={"net.core.wmem_max": 8388608})
    assert not lab_namespaces(rid)
    assert not list(tmp_path.iterdir())


def test_the_namespaced_list_is_what_the_kernel_does(root):
    for key in netkernel.NAMESPACED_SYSCTLS + netkernel.GLOBAL_SYSCTLS:
        namespaced, why = netkernel.sysctl_is_namespaced(key)
        assert namespaced == (key in netkernel.NAMESPACED_SYSCTLS), (key, why)


def test_qdisc_probes_answer_with_the_kernels_reason(root):
    assert net.qdisc_available("tbf", ("rate", "1mbit", "burst", "10kb", "latency", "10ms"))[0]
    for available, reason in (net.netem_available(), net.fq_available()):
        assert available or "tc says" in reason, reason
    assert not lab_namespaces("probe-")


@pytest.mark.parametrize("call, bad", [
    (lambda d: net.create_link("../etc", d), "'../etc'"),
    (lambda d: net.create_link("a b", d), "'a b'"),
    (lambda d: net.create_link("X1", d), "'X1'"),
    (lambda d: net.create_link("x" * 41, d), "xxxx"),
    (lambda d: net.create_link("ok", d, rate="100mbps"), "'100mbps'"),
    (lambda d: net.create_link("ok", d, rate="1kbit"), "'1kbit'"),
    (lambda d: net.create_link("ok", d, rate="100mbit;reboot"), "reboot"),
    (lambda d: net.create_link("ok", d, sysctls={"kernel.pid_max": 9}), "kernel.pid_max"),
    (lambda d: net.create_link("ok", d, sysctls={"net.ipv4.tcp_sack": "1;x"}), "'1;x'"),
    (lambda d: net.create_link("ok", d, sysctls={"net.ipv4.tcp_sack": -1}), "-1"),
    (lambda d: net.set_sysctls("netns-of-someone", {"net.ipv4.tcp_sack": 0}), "someone"),
])
def test_bad_values_are_refused_before_anything_runs(tmp_path, call, bad):
    with pytest.raises(ValueError, match=bad.replace("(", r"\(").replace(".", r"\.")):
        call(tmp_path)
    assert not list(tmp_path.iterdir())


CHILD = """
import sys, time
from pathlib import Path
from stacklab.netlab import net, netns
state, rid, marker = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
netns._probe_namespace().__enter__()        # a probe left behind, too
real_run = net._run
def run(argv, timeout=netns.CMD_TIMEOUT_S):
    out = real_run(argv, timeout)
    if "veth" in argv:                      # midway: both namespaces and the veth exist
        marker.write_text("created")
        time.sleep(60)
    return out
net._run = run
net.create_link(rid, state, "100mbit")
"""


def test_a_kill_9_midway_leaves_only_what_cleanup_stale_removes(root, tmp_path):
    rid, marker = run_id(), tmp_path / "marker"
    state = tmp_path / "state"
    state.mkdir()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(state), rid, str(marker)],
                             cwd=ROOT)
    try:
        deadline = time.monotonic() + 20
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), "the child did not get midway"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    probe = f"stacklab-probe-{child.pid}-"
    assert lab_namespaces(rid) == {f"stacklab-{rid}-srv", f"stacklab-{rid}-cli"}
    assert any(ns.startswith(probe) for ns in lab_namespaces())
    deleted = net.cleanup_stale(state)
    assert {f"stacklab-{rid}-srv", f"stacklab-{rid}-cli"} <= set(deleted)
    assert not lab_namespaces(rid)
    assert not any(ns.startswith(probe) for ns in lab_namespaces())
    assert not list(state.iterdir())
