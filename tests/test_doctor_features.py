"""`stacklab doctor`'s second table, the lab features: every feature the net.*, fs.* and
machine.* knobs need is listed with yes/no, why not (or what it uses) and its knob; the
probes are the ones a plan is validated with; and a missing feature never makes doctor
fail. The layers: the features laid out from fixed records, the gathering with its probes
stood in for, then this lab machine's own answers and the CLI run in-process."""

import gzip
import io
import os
import re
from pathlib import Path

import pytest
from rich.console import Console

from stacklab import inventory
from stacklab.cli import main
from stacklab.env import Environment
from stacklab.errors import ExitStatus
from stacklab.inventory import Feature, features
from stacklab.netlab import fs, net
from stacklab.report.listings import features_table
from stacklab.stacks import REGISTRY
from stacklab.netlab.layers import fs_problem

from helpers import require_engine, require_root

NETWORK = ["network namespaces (ip netns)", "rate shaping (tc tbf)",
           "added latency (tc netem)", "pacing (tc fq)"]
FILESYSTEMS = [f"filesystem {name}" for name in fs.FILESYSTEMS]
CGROUPS = ["cgroup cpuset", "cgroup cpu", "cgroup memory"]


def console() -> Console:
    return Console(file=io.StringIO(), width=240, color_system=None)


def rendered(table) -> str:
    out = console()
    out.print(table)
    return out.file.getvalue()


def row(text: str, name: str) -> str:
    """The table line of a feature (wide enough that no row wraps)."""
    return next(line for line in text.splitlines() if line.startswith(f"│ {name} "))


def kernel_config(option: str) -> str | None:
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            return next((line.strip() for line in f
                         if re.match(rf"(# )?CONFIG_{option}[= ]", line)), None)
    except OSError:
        return None


# the table, from fixed records -------------------------------------------------------

def test_the_table_shows_each_feature_its_answer_its_reason_and_its_knob():
    text = rendered(features_table([
        Feature("added latency (tc netem)", False, "the kernel refuses [netem]", "net.rtt_ms"),
        Feature("cgroup cpu", True, "cgroup v1 at /sys/fs/cgroup/cpu", "machine.cpu_quota"),
        Feature("pacing (tc fq)", True, "a fq qdisc was added", None)]))
    assert "lab features" in text
    assert re.search(r"│ added latency \(tc netem\) +│ no +│ the kernel refuses \[netem\] +"
                     r"│ net\.rtt_ms +│", text), text          # a reason is text, not markup
    assert re.search(r"│ cgroup cpu +│ yes +│ cgroup v1 at /sys/fs/cgroup/cpu +"
                     r"│ machine\.cpu_quota +│", text), text
    assert re.search(r"│ pacing \(tc fq\) .*│ — +│", text), text


# the gathering, with its probes stood in for -----------------------------------------

def test_without_namespaces_no_qdisc_is_probed_and_each_says_why(monkeypatch):
    def probe():
        raise AssertionError("probed without a namespace")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(net, "qdisc_available", lambda *a: probe())
    monkeypatch.setattr(net, "netem_available", probe)
    monkeypatch.setattr(net, "fq_available", probe)
    found = {f.name: f for f in inventory._network_features()}
    assert list(found) == NETWORK
    assert not found[NETWORK[0]].available and "root" in found[NETWORK[0]].detail
    for name in NETWORK[1:]:
        assert not found[name].available and "root" in found[name].detail, found[name]


def test_a_probe_that_fails_is_a_no_with_its_error_not_a_failed_doctor(monkeypatch):
    def broken():
        raise net.NetlabError("ip netns add stacklab-probe-1: Operation not permitted")
    monkeypatch.setattr(inventory, "_namespaces",
                        lambda: Feature(NETWORK[0], True, "ip netns as root", "net.mode=veth"))
    monkeypatch.setattr(net, "qdisc_available", lambda *a: broken())
    monkeypatch.setattr(net, "netem_available", broken)
    monkeypatch.setattr(net, "fq_available", lambda: (True, "a fq qdisc was added"))
    found = {f.name: f for f in inventory._network_features()}
    for name in ("rate shaping (tc tbf)", "added latency (tc netem)"):
        assert not found[name].available
        assert "Operation not permitted" in found[name].detail, found[name]
    assert found["pacing (tc fq)"].available


# this lab machine ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def found() -> dict[str, Feature]:
    require_root("the namespace, qdisc and filesystem probes")
    return {f.name: f for f in features()}


def test_every_feature_is_listed_once_with_a_knob_that_exists(found):
    pressure = ["memory pressure (PSI)", "I/O pressure (PSI)"]
    assert list(found) == NETWORK + FILESYSTEMS + CGROUPS + pressure
    for f in found.values():
        if f.knob is None:       # no knob paces yet; pressure is read by every run
            assert f.name in ("pacing (tc fq)", *pressure)
            continue
        key, _, value = f.knob.partition("=")
        knob = REGISTRY.get(key)
        assert knob is not None, f.knob
        assert not value or value in knob.choices, f.knob
        assert f.detail, f


def test_this_machine_netem_no_with_the_kernels_reason_tbf_yes_xfs_yes_jfs_no(found):
    netem_config = kernel_config("NET_SCH_NETEM")
    if netem_config != "# CONFIG_NET_SCH_NETEM is not set" or "jfs" in Path(
            "/proc/filesystems").read_text():
        pytest.skip(f"not this lab machine's kernel: {netem_config}")
    netem = found["added latency (tc netem)"]
    assert not netem.available
    assert "tc says" in netem.detail and netem_config in netem.detail, netem
    tbf = found["rate shaping (tc tbf)"]
    assert tbf.available and "tbf qdisc was added" in tbf.detail, tbf
    assert found["network namespaces (ip netns)"].available
    assert found["filesystem xfs"].available, found["filesystem xfs"]
    assert found["filesystem xfs"].detail == "mkfs.xfs on a loop device"
    jfs = found["filesystem jfs"]
    assert not jfs.available and jfs.detail.startswith("the kernel has no jfs ("), jfs
    assert not [ns for ns in net.namespaces()                   # the probes left none
                if ns.startswith(f"stacklab-probe-{os.getpid()}-")]


def test_doctors_filesystem_answers_are_what_a_plan_is_validated_with(found):
    for name in fs.FILESYSTEMS:
        refused = fs_problem({"type": name, "cold_cache": False, "size_mb": 512,
                              "options": ""})
        assert found[f"filesystem {name}"].available == (refused is None), (name, refused)


def test_the_cgroup_rows_name_the_hierarchy_they_use(found):
    for name in CGROUPS:
        f = found[name]
        if f.available:
            assert re.fullmatch(r"cgroup v[12] at /\S+", f.detail), f


# the CLI, in-process -------------------------------------------------------------------

def env_for(tmp_path) -> Environment:
    return Environment(stdout=console(), stderr=console(), clock=lambda: "2026-01-02T03:04:05Z",
                       db=tmp_path / "r.db", lab_root=tmp_path / "lab")


def test_doctor_prints_the_features_after_the_components_and_exits_0(tmp_path, found):
    require_engine()
    env = env_for(tmp_path)
    assert main(["doctor"], env) == ExitStatus.OK
    text = env.stdout.file.getvalue()
    assert text.index("stacklab doctor") < text.index("lab features")
    for name, f in found.items():
        line = row(text, name)
        assert re.search(rf"│ {'yes' if f.available else 'no'} +│", line), line
    assert "CONFIG_NET_SCH_NETEM" in row(text, "added latency (tc netem)") or \
        found["added latency (tc netem)"].available


def test_doctor_exits_0_when_no_lab_feature_is_here(tmp_path, monkeypatch):
    require_engine()
    monkeypatch.setattr("stacklab.commands.listing.features", lambda: [
        Feature(name, False, "not here", None) for name in NETWORK + FILESYSTEMS + CGROUPS])
    env = env_for(tmp_path)
    assert main(["doctor"], env) == ExitStatus.OK
    text = env.stdout.file.getvalue()
    assert "the default experiment can run" in text
    assert all(re.search(r"│ no +│ not here", row(text, n)) for n in NETWORK + CGROUPS)


@pytest.mark.parametrize("reader, path", [("host_memory_stall_us", "/proc/pressure/memory"),
                                          ("host_io_stall_us", "/proc/pressure/io")])
def test_pressure_is_a_feature_with_its_reason_when_missing(monkeypatch, reader, path):
    from stacklab import inventory
    monkeypatch.setattr(inventory, reader, lambda: None)
    [psi] = [f for f in inventory._pressure_features() if path in f.detail]
    assert not psi.available and f"no {path}" in psi.detail
    monkeypatch.setattr(inventory, reader, lambda: 76_862_055)
    assert all(f.available for f in inventory._pressure_features())
