"""Virtual hosts: the server and the client (load engine) in two network namespaces
joined by a veth pair, so the network between them is a layer of the experiment.

`create_link` makes `stacklab-<id>-srv` and `stacklab-<id>-cli`, a veth pair created
directly inside them (the host never holds either end, so the host's interfaces and
routes stay as they were), one /30 of 198.18.0.0/15 (RFC 2544's benchmarking range) on
it, and optionally a token-bucket rate on both ends and per-namespace sysctls. Before
anything is created its names are written to a record in the caller's state
directory, so a stacklab killed at any moment leaves a record that `cleanup_stale`
acts on. Commands are argv lists (never a shell) and every value in them is checked
first: a bad one is one ValueError naming it.

The link is verified, not trusted: `measure_rate` moves real bytes from a server in
one namespace to a client in the other and `measure_rtt` times a TCP ping-pong (both
in netmeasure.py); `set_sysctls` reads each value back inside and on the host, and what
this kernel cannot do is probed for real (`netem_available`, `fq_available`), with the
kernel's answer (all three in netkernel.py). Naming, listing and deleting namespaces,
and running commands on them, is netns.py's.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..host.procs import pid_alive
from .netkernel import check_sysctl, set_sysctls
from .netmeasure import measure_rate, measure_rtt
from .netns import (LAB_NS, PREFIX, PROBE_NS, NetlabError, _delete_namespace, _run,
                    namespaces)
# Read as net.<name> by inventory.py, validate.py and tests/test_netlab_run.py; they
# live in netkernel.py with the other answers of the kernel.
from .netkernel import (NAMESPACED_SYSCTLS, _host_sysctl, fq_available,  # noqa: F401
                        netem_available, qdisc_available)

RUN_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
RECORD = "netlab-{run_id}.json"
RECORD_VERSION = 1

NETWORK = ipaddress.IPv4Network("198.18.0.0/15")
SUBNET_PREFIX = 30                      # one /30 per link: network, server, client, broadcast
SUBNETS = NETWORK.num_addresses >> (32 - SUBNET_PREFIX)

UNLIMITED = "unlimited"
RATE = re.compile(r"(\d+(?:\.\d+)?)(kbit|mbit|gbit)")
RATE_UNIT = {"kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
# tbf's bucket: at least the largest packet veth hands it (a 64 KiB GSO super-packet plus
# headers: a smaller bucket makes tbf cut every one back into MTU segments in software),
# and at least what the rate earns in one 250 Hz tick (tc-tbf(8): burst >= rate/HZ, or
# the configured rate is not reached; CONFIG_HZ is 250 here).
BURST_MIN_BYTES = 128 * 1024
BURST_TICK_S = 1 / 250
# tbf's queue, as the time it holds at the rate (`latency`, limit = rate x latency +
# burst): a router's 20 ms buffer, enough that one TCP flow is not cut back by local
# drops below the rate, small enough that a shaped link does not hide a bufferbloat.
QUEUE_LATENCY = "20ms"


# --- validation -----------------------------------------------------------------------

def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} is not 1-40 characters of a-z, 0-9 and '-' "
                         "starting with a letter or digit")
    return run_id


def check_rate(rate: str) -> int | None:
    """Bits per second of a rate such as "100mbit", "1gbit", "512kbit"; None for
    "unlimited"."""
    if rate == UNLIMITED:
        return None
    m = RATE.fullmatch(rate) if isinstance(rate, str) else None
    bits = float(m.group(1)) * RATE_UNIT[m.group(2)] if m else 0
    if not m or not 8_000 <= bits <= 100 * 10**9:
        raise ValueError(f"rate {rate!r} is not \"unlimited\" or a rate such as \"100mbit\", "
                         "\"1gbit\" (kbit, mbit, gbit; from 8kbit to 100gbit)")
    return int(bits)


# --- records --------------------------------------------------------------------------

def _write_record(path: Path, record: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    tmp.rename(path)


def cleanup_stale(state_dir: Path) -> list[str]:
    """Delete the namespaces named by records in `state_dir` (only lab names: prefix
    `stacklab-`), and throw-away probe namespaces whose creating process is gone; remove
    the records. Returns the namespaces deleted."""
    deleted = []
    for path in Path(state_dir).glob(RECORD.format(run_id="*") + ".tmp"):
        path.unlink(missing_ok=True)      # killed while writing it: nothing made yet
    for path in sorted(Path(state_dir).glob(RECORD.format(run_id="*"))):
        try:
            names = json.loads(path.read_text()).get("namespaces", [])
        except (OSError, ValueError, AttributeError):
            names = []          # cut short by the kill: nothing was created after it
        live = namespaces()
        for ns in names:
            if isinstance(ns, str) and LAB_NS.fullmatch(ns) and ns in live:
                _delete_namespace(ns)
                deleted.append(ns)
        path.unlink(missing_ok=True)
    for ns in sorted(namespaces()):
        m = PROBE_NS.fullmatch(ns)
        if m and not pid_alive(int(m.group(1))):
            _delete_namespace(ns)
            deleted.append(ns)
    return deleted


# --- the link -------------------------------------------------------------------------

@dataclass
class Link:
    run_id: str
    record: Path
    server_ns: str
    client_ns: str
    server_dev: str
    client_dev: str
    server_addr: str
    client_addr: str
    rate: str = UNLIMITED
    closed: bool = field(default=False, compare=False)

    def exec_prefix(self, ns: str) -> list[str]:
        """The argv prefix that starts a program inside `ns` (one of this link's)."""
        if ns not in (self.server_ns, self.client_ns):
            raise ValueError(f"namespace {ns!r} is not one of link {self.run_id}'s "
                             f"({self.server_ns}, {self.client_ns})")
        return ["ip", "netns", "exec", ns]

    def counters(self) -> dict[str, dict[str, int]]:
        """Bytes, packets and drops each veth end has received and sent, and its qdisc's
        drops, read inside its namespace: {"server": {...}, "client": {...}}."""
        return {"server": _dev_counters(self.server_ns, self.server_dev),
                "client": _dev_counters(self.client_ns, self.client_dev)}

    def measure_rate(self, nbytes: int = 20_000_000) -> float:
        """Bytes per second of one transfer from the server to the client namespace."""
        return measure_rate(self, check_rate(self.rate), nbytes)

    def measure_rtt(self, rounds: int = 50) -> float:
        """Median seconds of a 1-byte TCP ping-pong between the namespaces."""
        return measure_rtt(self, rounds)

    def close(self) -> None:
        """Delete both namespaces (their veth ends go with them; a process still inside
        is killed), then the record, which stays if a namespace could not be deleted."""
        delete_recorded((self.server_ns, self.client_ns), self.record,
                        f"link {self.run_id}")
        self.closed = True

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def delete_recorded(names: tuple[str, ...], record: Path, what: str) -> None:
    """Delete namespaces `names` (a process still inside is killed), then their `record`,
    which stays, for cleanup_stale, if one could not be deleted (a NetlabError naming
    `what` and why)."""
    failed = []
    for ns in names:
        try:
            _delete_namespace(ns)
        except NetlabError as e:
            failed.append(str(e))
    if failed:
        raise NetlabError(f"{what} not closed: {'; '.join(failed)}")
    record.unlink(missing_ok=True)


IPV6 = Path("/proc/sys/net/ipv6")


def join_pair(a: tuple[str, str, str], b: tuple[str, str, str]) -> None:
    """A veth pair between two namespaces, each end (namespace, device, address) made
    inside its namespace (the host holds neither), addressed on one /30 and up."""
    _run(["ip", "link", "add", a[1], "netns", a[0], "type", "veth",
          "peer", "name", b[1], "netns", b[0]])
    for ns, dev, addr in (a, b):
        if IPV6.exists():
            # the lab speaks IPv4 (198.18.0.0/15): IPv6's own traffic on the link (router
            # solicitations, MLD reports) would cross it during a load and be counted
            _run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                  f"net.ipv6.conf.{dev}.disable_ipv6=1"])
        _run(["ip", "-n", ns, "addr", "add", f"{addr}/{SUBNET_PREFIX}", "dev", dev])
        _run(["ip", "-n", ns, "link", "set", dev, "up"])


def _dev_counters(ns: str, dev: str) -> dict[str, int]:
    stats = json.loads(_run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev]))
    rx, tx = stats[0]["stats64"]["rx"], stats[0]["stats64"]["tx"]
    qdiscs = json.loads(_run(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev])
                        or "[]")
    return {"rx_bytes": rx["bytes"], "rx_packets": rx["packets"], "rx_dropped": rx["dropped"],
            "tx_bytes": tx["bytes"], "tx_packets": tx["packets"], "tx_dropped": tx["dropped"],
            "qdisc_drops": sum(q.get("drops", 0) for q in qdiscs),
            "qdisc_overlimits": sum(q.get("overlimits", 0) for q in qdiscs)}


def device_names(run_id: str) -> tuple[str, str]:
    """The veth ends' names: `stl` + 6 hex digits of the id's hash + s/c (IFNAMSIZ: at
    most 15). They live only inside the run's namespaces, so they cannot clash."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:6]
    return f"stl{digest}s", f"stl{digest}c"


def _subnets_in_use() -> set[ipaddress.IPv4Network]:
    used = set()
    for ns in namespaces():
        if not LAB_NS.fullmatch(ns):
            continue
        try:
            links = json.loads(_run(["ip", "-n", ns, "-j", "-4", "addr", "show"]) or "[]")
        except NetlabError:
            continue                       # deleted while we looked
        for link in links:
            for a in link.get("addr_info", []):
                addr = ipaddress.IPv4Address(a["local"])
                if addr in NETWORK:
                    used.add(ipaddress.IPv4Network(f"{addr}/{SUBNET_PREFIX}", strict=False))
    return used


def allocate_subnet(run_id: str) -> ipaddress.IPv4Network:
    """A /30 of 198.18.0.0/15 no other lab namespace uses: the one the id hashes to, or
    the next free one. (Each link is a world of its own, so equal addresses could not
    mix traffic; distinct ones keep two runs' captures and logs apart.)"""
    used = _subnets_in_use()
    start = int(hashlib.sha256(run_id.encode()).hexdigest(), 16) % SUBNETS
    for i in range(SUBNETS):
        index = (start + i) % SUBNETS
        net = ipaddress.IPv4Network(
            (int(NETWORK.network_address) + (index << (32 - SUBNET_PREFIX)), SUBNET_PREFIX))
        if net not in used:
            return net
    raise NetlabError("every /30 of 198.18.0.0/15 is in use by lab namespaces")


def tbf_args(rate: str) -> list[str]:
    """`tc qdisc replace` arguments after the device for this rate (see BURST_MIN_BYTES
    and QUEUE_LATENCY for the choices); [] for "unlimited"."""
    bits = check_rate(rate)
    if bits is None:
        return []
    burst = max(BURST_MIN_BYTES, int(bits / 8 * BURST_TICK_S))
    return ["root", "tbf", "rate", rate, "burst", str(burst), "latency", QUEUE_LATENCY]


def create_link(run_id: str, state_dir: Path, rate: str = UNLIMITED,
                sysctls: dict[str, str | int] | None = None) -> Link:
    """Two namespaces joined by a veth pair, addressed, up, shaped to `rate` in both
    directions, with `sysctls` set (and verified) in the server namespace."""
    check_run_id(run_id)
    tbf = tbf_args(rate)
    sysctls = {k: check_sysctl(k, v) for k, v in (sysctls or {}).items()}
    server_ns, client_ns = f"{PREFIX}{run_id}-srv", f"{PREFIX}{run_id}-cli"
    present = {server_ns, client_ns} & namespaces()
    if present:
        raise NetlabError(f"namespace {sorted(present)[0]} exists already: a run id is used "
                          "once (an earlier run's leftover goes with cleanup_stale)")
    server_dev, client_dev = device_names(run_id)
    net = allocate_subnet(run_id)
    server_addr, client_addr = (str(a) for a in list(net.hosts())[:2])
    record = Path(state_dir) / RECORD.format(run_id=run_id)
    _write_record(record, {"version": RECORD_VERSION, "run_id": run_id,
                           "namespaces": [server_ns, client_ns],
                           "server_addr": server_addr, "client_addr": client_addr})
    link = Link(run_id, record, server_ns, client_ns, server_dev, client_dev,
                server_addr, client_addr, rate)
    try:
        _run(["ip", "netns", "add", server_ns])
        _run(["ip", "netns", "add", client_ns])
        join_pair((server_ns, server_dev, server_addr), (client_ns, client_dev, client_addr))
        for ns, dev in ((server_ns, server_dev), (client_ns, client_dev)):
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            if tbf:
                _run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, *tbf])
        if sysctls:
            set_sysctls(server_ns, sysctls)
    except BaseException:
        try:
            link.close()
        except NetlabError:
            pass                 # the record stays: cleanup_stale finishes the job
        raise
    return link
