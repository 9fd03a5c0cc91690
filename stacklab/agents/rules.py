"""What load.agents may go with (its plan rule), and --agents-listen's address."""

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

    address: str              # host:port
    wait_s: float = 120.0


def check_listen(value: str) -> str:
    """--agents-listen's HOST:PORT, or a UsageError naming the flag and the value."""
    host, colon, port = value.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535 \
            or any(c.isspace() or c in "/@?#" for c in host):
        raise UsageError(f"--agents-listen {value!r}: expected HOST:PORT, e.g. "
                         "192.0.2.10:8786 (an address of this host the load hosts reach)")
    return f"{host}:{port}"
