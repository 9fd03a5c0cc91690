"""What load.agents may go with (its plan rule), and --agents-listen's address."""

import errno
import ipaddress
import os
import pwd
import re
import socket
from dataclasses import dataclass

from ..errors import UsageError

def agents_problem(knobs: dict[str, dict]) -> str | None:
    """Why the trial's load cannot go through agents, or None: a local agent is a network
    namespace of its own, joined to the server's, so the run needs veth; a server the
    user runs ([external]) is loaded by agents on other hosts (--agents-listen)."""
    count = knobs["load"].get("agents", 0)
    if not count:
        return None
    net = knobs.get("net", {})
    if net.get("mode") != "veth" and "external" not in knobs:
        return (f"load.agents = {count} runs each agent in a network namespace of its own, "
                "joined to the server's: set net.mode = \"veth\" (on loopback every agent "
                "would be the same host)")
    if net.get("link", "unlimited") != "unlimited" or net.get("rtt_ms"):
        return (f"load.agents = {count}: each agent has a link of its own to the server, "
                "not shaped or measured as net.link and net.rtt_ms shape and measure the "
                "one link: leave them at their defaults with agents")
    if knobs["load"].get("cpus"):
        return (f"load.agents = {count}: load.cpus pins one engine; the agents' engines are "
                "not pinned: leave load.cpus unset with agents")
    return None


@dataclass(frozen=True)
class AgentsListen:
    """The user's --agents-listen: where the scheduler listens for agents on other
    hosts, and how long it waits for them."""

    address: str              # host:port, an IPv6 literal in brackets ([::1]:8786)
    wait_s: float = 120.0


# The one name taken for loopback without a lookup (/etc/hosts gives it, not DNS).
LOCAL_NAME = "localhost"
# A host name's limits (RFC 1035): 253 characters, labels of 1-63.
NAME = re.compile(r"(?=.{1,253}\.?$)[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*\.?")
EXPECTED = ("expected HOST:PORT, e.g. 192.0.2.10:8786 or [2001:db8::10]:8786 (an address "
            "of this host the load hosts reach)")


def check_listen(value: str, allow_remote: bool = False) -> str:
    """--agents-listen's HOST:PORT as Dask spells it (an IPv6 literal in brackets), or a
    UsageError naming the flag and the value. A host that is not loopback (127.0.0.0/8,
    ::1, localhost: decided on the text, nothing looked up) needs --allow-remote, since
    anyone who reaches the scheduler there can have the workers run their code."""
    host, colon, port = value.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    bare = host[1:-1] if bracketed else host
    ip = _literal(bare)
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UsageError(f"--agents-listen {value!r}: {EXPECTED}")
    if bracketed != isinstance(ip, ipaddress.IPv6Address):
        raise UsageError(f"--agents-listen {value!r}: " + (
            "only an IPv6 address goes in brackets" if bracketed else
            f"an IPv6 address goes in brackets, [{host}]:{port}"))
    if ip is None and not NAME.fullmatch(host):
        shown = value if len(value) <= 60 else f"{value[:40]}…{value[-12:]}"
        raise UsageError(f"--agents-listen {shown!r} ({len(host)} characters before the "
                         ":PORT): not a host name (letters, digits and hyphens, labels of "
                         f"1-63 characters, 253 in all); {EXPECTED}")
    local = ip.is_loopback if ip is not None else host.lower() == LOCAL_NAME
    if not local and not allow_remote:
        raise UsageError(f"--agents-listen {value!r} is not a loopback address, and "
                         "Dask's scheduler is unauthenticated: whoever reaches it there "
                         f"runs code as {_user()}; pass --allow-remote to listen there, on "
                         "a network only the load hosts reach (docs/load.md, \"Load from "
                         "several hosts\")")
    return f"{host}:{port}"


def check_bindable(address: str) -> None:
    """A UsageError naming --agents-listen's `address` (check_listen's) unless the
    scheduler can listen there now: an address of this host, a free port. Tried by
    binding each address the host gives, as the scheduler will (SO_REUSEADDR, so a port
    a previous run left in TIME_WAIT passes), then letting go: said before a run starts,
    not as a traceback after the experiment is created."""
    host, _, port = address.rpartition(":")
    bare = host[1:-1] if host.startswith("[") else host
    try:
        for family, kind, proto, _, where in socket.getaddrinfo(
                bare, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(where)
    except (OSError, UnicodeError) as e:
        raise UsageError(f"--agents-listen {address!r}: cannot listen there "
                         f"({_why(e)})") from None


def _why(e: BaseException) -> str:
    if isinstance(e, socket.gaierror):
        return f"{e.strerror}: not a name this host resolves"
    if isinstance(e, OSError) and e.errno == errno.EADDRNOTAVAIL:
        return f"{e.strerror}: not an address of this host"
    if isinstance(e, OSError) and e.errno == errno.EADDRINUSE:
        return f"{e.strerror}: another program listens on that port"
    return getattr(e, "strerror", None) or str(e)


def _user() -> str:
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
