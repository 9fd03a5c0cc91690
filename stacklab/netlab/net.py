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
one namespace to a client in the other, `measure_rtt` times a TCP ping-pong, and
`set_sysctls` reads each value back inside and on the host. What this kernel cannot
do is probed for real (`netem_available`, `fq_available`), with the kernel's answer.
"""

from __future__ import annotations

import gzip
import hashlib
import ipaddress
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StacklabError, printable

PREFIX = "stacklab-"
RUN_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
LAB_NS = re.compile(r"stacklab-[a-z0-9][a-z0-9-]{0,59}")
PROBE_NS = re.compile(r"stacklab-probe-(\d+)-[0-9a-f]{8}")
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

SYSCTL_KEY = re.compile(r"net(?:\.[a-z0-9_]+){2,4}")
SYSCTL_VALUE = re.compile(r"\d{1,12}(?: \d{1,12}){0,3}")
# Of the S1/S5 network sysctls, those this kernel (6.18) keeps per network namespace,
# found by writing each inside a fresh namespace and reading it back inside and on the
# host (`sysctl_is_namespaced`; a test pins this list to that probe). net.core.rmem_max,
# wmem_max, rmem_default and wmem_default are read-only inside a namespace here (mode
# 0444 under /proc/sys; `sysctl -w` says "Invalid argument") and stay global.
NAMESPACED_SYSCTLS = ("net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps",
                      "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_time",
                      "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.somaxconn")
GLOBAL_SYSCTLS = ("net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default",
                  "net.core.wmem_default")

CMD_TIMEOUT_S = 15.0


class NetlabError(StacklabError):
    """A namespace, link, qdisc or measurement could not be set up or did not work."""


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


def check_sysctl(key: str, value: str | int) -> str:
    """The value as `sysctl -w` takes it ("4096 87380 6291456" for a vector)."""
    if not isinstance(key, str) or not SYSCTL_KEY.fullmatch(key):
        raise ValueError(f"sysctl {key!r}: only net.* keys (lowercase, dotted) can be set in "
                         "a network namespace")
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not SYSCTL_VALUE.fullmatch(" ".join(text.split())):
        raise ValueError(f"sysctl {key}: value {value!r} is not one to four non-negative "
                         "integers")
    return " ".join(text.split())


def check_namespace(ns: str) -> str:
    if not isinstance(ns, str) or not LAB_NS.fullmatch(ns):
        raise ValueError(f"namespace {ns!r} is not one of the lab's (stacklab-…)")
    return ns


# --- commands -------------------------------------------------------------------------

def _run(argv: list[str], timeout: float = CMD_TIMEOUT_S) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NetlabError(f"{' '.join(argv)}: no answer within {timeout:g} s") from None
    if done.returncode != 0:
        raise NetlabError(f"{' '.join(argv)}: {printable(done.stderr.strip())} "
                          f"(exit {done.returncode})")
    return done.stdout


def namespaces() -> set[str]:
    """Names of the network namespaces `ip netns` knows."""
    out = _run(["ip", "-j", "netns", "list"]).strip()
    return {entry["name"] for entry in json.loads(out)} if out else set()


def _delete_namespace(ns: str) -> None:
    """Kill what still runs inside (only the lab starts processes in its namespaces; a
    live process would keep the namespace and its veth alive), then delete it."""
    check_namespace(ns)
    if ns not in namespaces():
        return
    for pid in _run(["ip", "netns", "pids", ns]).split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _run(["ip", "netns", "delete", ns])


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
        if m and not _alive(int(m.group(1))):
            _delete_namespace(ns)
            deleted.append(ns)
    return deleted


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


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
        return measure_rate(self, nbytes)

    def measure_rtt(self, rounds: int = 50) -> float:
        return measure_rtt(self, rounds)

    def close(self) -> None:
        """Delete both namespaces (their veth ends go with them; a process still inside
        is killed), then the record, which stays if a namespace could not be deleted."""
        failed = []
        for ns in (self.server_ns, self.client_ns):
            try:
                _delete_namespace(ns)
            except NetlabError as e:
                failed.append(str(e))
        if failed:
            raise NetlabError(f"link {self.run_id} not closed: {'; '.join(failed)}")
        self.record.unlink(missing_ok=True)
        self.closed = True

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
        _run(["ip", "link", "add", server_dev, "netns", server_ns, "type", "veth",
              "peer", "name", client_dev, "netns", client_ns])
        for ns, dev, addr in ((server_ns, server_dev, server_addr),
                              (client_ns, client_dev, client_addr)):
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{addr}/{SUBNET_PREFIX}", "dev", dev])
            _run(["ip", "-n", ns, "link", "set", dev, "up"])
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


# --- sysctls --------------------------------------------------------------------------

def _host_sysctl(key: str) -> str:
    return " ".join(Path("/proc/sys", *key.split(".")).read_text().split())


def _ns_sysctl(ns: str, key: str) -> str:
    return " ".join(_run(["ip", "netns", "exec", ns, "sysctl", "-n", key]).split())


def set_sysctls(ns: str, values: dict[str, str | int]) -> None:
    """Write each sysctl inside `ns`, then check it took effect there and left the
    host's value alone; ValueError naming the key otherwise (a global one is put back)."""
    check_namespace(ns)
    checked = {k: check_sysctl(k, v) for k, v in values.items()}
    for key, value in checked.items():
        host_before = _host_sysctl(key)
        said = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-w", f"{key}={value}"],
                              capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
        inside, host_after = _ns_sysctl(ns, key), _host_sysctl(key)
        if host_after != host_before:
            Path("/proc/sys", *key.split(".")).write_text(host_before)
            raise ValueError(f"sysctl {key} is not per-namespace on this kernel: writing it "
                             f"inside {ns} changed the host's value (put back to "
                             f"{host_before!r})")
        if inside != value:
            why = printable(said.stderr.strip()) or f"it reads {inside!r}"
            raise ValueError(f"sysctl {key} is not per-namespace on this kernel: writing "
                             f"{value!r} inside {ns} left it at {inside!r} and the host's at "
                             f"{host_after!r} ({why})")


def sysctl_is_namespaced(key: str) -> tuple[bool, str]:
    """Whether `key` can be set per network namespace here, found by setting it (to a
    value other than its current one) in a throw-away namespace."""
    check_sysctl(key, 0)
    with _probe_namespace() as ns:
        parts = _ns_sysctl(ns, key).split()
        last = int(parts[-1])
        parts[-1] = str(last - 1 if last > 0 else 1)
        value = " ".join(parts)
        try:
            set_sysctls(ns, {key: value})
        except ValueError as e:
            return False, str(e)
    return True, f"{value!r} written inside a namespace took, the host kept its value"


# --- probes ---------------------------------------------------------------------------

class _probe_namespace:
    """A throw-away namespace named with this process's pid (so cleanup_stale removes
    it once this process is gone, even after a kill -9)."""

    def __enter__(self) -> str:
        self.ns = f"{PREFIX}probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        _run(["ip", "netns", "add", self.ns])
        return self.ns

    def __exit__(self, *exc) -> None:
        _delete_namespace(self.ns)


def qdisc_available(kind: str, params: tuple[str, ...] = ()) -> tuple[bool, str]:
    """Whether the kernel takes a `kind` qdisc: tried on a veth in a throw-away
    namespace; the reason is the kernel's own answer (and its config line, if shown)."""
    if not re.fullmatch(r"[a-z_]{1,16}", kind) or not all(
            re.fullmatch(r"[a-z0-9.]{1,16}", p) for p in params):
        raise ValueError(f"qdisc {kind!r} {params!r}: not a plain qdisc kind and parameters")
    with _probe_namespace() as ns:
        _run(["ip", "-n", ns, "link", "add", "stlprobe0", "type", "veth",
              "peer", "name", "stlprobe1"])
        tried = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "stlprobe0", "root",
                                kind, *params], capture_output=True, text=True,
                               timeout=CMD_TIMEOUT_S)
        if tried.returncode != 0:
            config = _kernel_config(f"NET_SCH_{kind.upper()}")
            return False, (f"the kernel refuses a {kind} qdisc: tc says "
                           f"{printable(tried.stderr.strip())!r}"
                           + (f"; kernel config: {config}" if config else ""))
    return True, f"a {kind} qdisc was added on a veth in a throw-away namespace"


def netem_available() -> tuple[bool, str]:
    """Whether delay and loss can be emulated (sch_netem)."""
    return qdisc_available("netem", ("delay", "1ms"))


def fq_available() -> tuple[bool, str]:
    """Whether the fair-queue qdisc (sch_fq: pacing) exists."""
    return qdisc_available("fq")


def _kernel_config(option: str) -> str | None:
    """How /proc/config.gz sets CONFIG_<option> ("# CONFIG_X is not set"), if shown."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if re.fullmatch(rf"(# )?CONFIG_{option}[= ].*", line.strip()):
                    return line.strip()
    except OSError:
        return None
    return None


# --- measurements ---------------------------------------------------------------------

# Peers started inside the namespaces: `send` and `echo` servers print their port when
# listening; the `recv` and `ping` clients print JSON. Socket timeouts end them however
# the other side fails.
_PEER = r"""
import json, socket, sys, time
mode, addr = sys.argv[1], sys.argv[2]
if mode in ("send", "echo"):
    s = socket.socket(); s.settimeout(60); s.bind((addr, 0)); s.listen(1)
    print(s.getsockname()[1], flush=True)
    c, _ = s.accept(); c.settimeout(60)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "send":
        left, chunk = int(sys.argv[3]), memoryview(bytes(1 << 20))
        while left > 0:
            left -= c.send(chunk[:min(left, len(chunk))])
        c.shutdown(socket.SHUT_WR); c.recv(1)
    else:
        while (data := c.recv(64)):
            c.sendall(data)
else:
    c = socket.create_connection((addr, int(sys.argv[3])), timeout=60)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "recv":
        buf, got, t0 = bytearray(1 << 20), 0, time.perf_counter()
        while (n := c.recv_into(buf)):
            got += n
        print(json.dumps({"bytes": got, "seconds": time.perf_counter() - t0}))
    else:
        samples = []
        for i in range(int(sys.argv[4]) + 5):
            t0 = time.perf_counter(); c.sendall(b"x")
            if c.recv(1) != b"x":
                raise SystemExit("echo lost")
            if i >= 5:
                samples.append(time.perf_counter() - t0)
        print(json.dumps({"rtt_s": samples}))
"""


def _exchange(link: Link, server_mode: str, client_args: list[str], server_args: list[str],
              timeout: float) -> dict:
    """Run a peer server in the server namespace and a client in the client namespace;
    the client's JSON answer."""
    server = subprocess.Popen(
        link.exec_prefix(link.server_ns)
        + [sys.executable, "-c", _PEER, server_mode, link.server_addr, *server_args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], CMD_TIMEOUT_S)
        port = server.stdout.readline().strip() if ready else ""
        if not port.isdigit():
            server.kill()
            raise NetlabError(f"the {server_mode} peer in {link.server_ns} did not listen: "
                              f"{printable(server.communicate(timeout=5)[1].strip())}")
        client_mode = "recv" if server_mode == "send" else "ping"
        out = _run(link.exec_prefix(link.client_ns) + [
            sys.executable, "-c", _PEER, client_mode, link.server_addr, port, *client_args],
            timeout=timeout)
        server.wait(timeout=CMD_TIMEOUT_S)
        return json.loads(out)
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate()


def measure_rate(link: Link, nbytes: int = 20_000_000) -> float:
    """Bytes per second of one TCP transfer of `nbytes` from the server namespace to the
    client namespace, timed by the client from connect to the last byte."""
    if not isinstance(nbytes, int) or not 1 <= nbytes <= 10**10:
        raise ValueError(f"nbytes {nbytes!r} is not a byte count from 1 to 10^10")
    bits = check_rate(link.rate)
    timeout = 30 + (3 * nbytes * 8 / bits if bits else 0)
    got = _exchange(link, "send", [], [str(nbytes)], timeout)
    if got["bytes"] != nbytes:
        raise NetlabError(f"the transfer over {link.run_id} delivered {got['bytes']} of "
                          f"{nbytes} bytes")
    return got["bytes"] / got["seconds"]


def measure_rtt(link: Link, rounds: int = 50) -> float:
    """Median seconds of a 1-byte TCP ping-pong between the namespaces (after 5 rounds
    of warm-up)."""
    if not isinstance(rounds, int) or not 1 <= rounds <= 100_000:
        raise ValueError(f"rounds {rounds!r} is not a count from 1 to 100000")
    got = _exchange(link, "echo", [str(rounds)], [], 30 + rounds * 0.1)
    return statistics.median(got["rtt_s"])
