"""The network of local load agents: each agent a host of its own, one network namespace
per agent, as if the load came from several machines.

`create_agent_net` makes `stacklab-<id>-ctl` (where the agents' coordinator, the Dask
scheduler, listens) and `stacklab-<id>-a<k>` for each agent k, each agent joined to the
control namespace by a veth pair of its own (a /30 of 198.18.0.0/15): the agents' control
traffic crosses a network, as between hosts, and none of it touches the host's interfaces.
For each run `attach` joins every agent to that run's server namespace by another veth
pair, routed to the server's address; the pairs go with the run's server namespace.
Names are written to a record first (net.RECORD), so `net.cleanup_stale` removes what a
killed stacklab left. Commands are argv lists, never a shell.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from . import net
from .netns import PREFIX, NetlabError, _run, namespaces


@dataclass
class AgentNet:
    run_id: str
    record: Path
    control_ns: str
    agent_ns: tuple[str, ...]
    # per agent: the control namespace's address on its pair, and the agent's own
    control_addrs: tuple[str, ...]
    agent_addrs: tuple[str, ...]
    closed: bool = field(default=False, compare=False)

    def attach(self, server_ns: str, server_addr: str, count: int) -> tuple[str, ...]:
        """Join agents 0..count-1 to `server_ns` (a run's server namespace), each by a veth
        pair routed to `server_addr`; their load addresses. The pairs are deleted with
        `server_ns` (a veth pair goes when either end's namespace goes)."""
        if not 1 <= count <= len(self.agent_ns):
            raise ValueError(f"{count} agents asked, {len(self.agent_ns)} made")
        addrs = []
        for k in range(count):
            subnet = net.allocate_subnet(f"{self.run_id}-{server_ns}-{k}")
            server_side, agent_side = (str(a) for a in list(subnet.hosts())[:2])
            server_dev, agent_dev = _device_names(f"{server_ns}-{k}")
            net.join_pair((server_ns, server_dev, server_side),
                          (self.agent_ns[k], agent_dev, agent_side))
            _run(["ip", "-n", self.agent_ns[k], "route", "replace", f"{server_addr}/32",
                  "via", server_side, "dev", agent_dev])
            addrs.append(agent_side)
        return tuple(addrs)

    def close(self) -> None:
        """Delete every namespace (a process still inside is killed), then the record,
        which stays if one could not be deleted."""
        net.delete_recorded((*self.agent_ns, self.control_ns), self.record,
                            f"agent network {self.run_id}")
        self.closed = True

    def __enter__(self) -> AgentNet:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _device_names(key: str) -> tuple[str, str]:
    """A veth pair's end names (IFNAMSIZ: at most 15), from a hash of `key`."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:7]
    return f"sta{digest}x", f"sta{digest}y"


def create_agent_net(run_id: str, state_dir: Path, count: int) -> AgentNet:
    """The control namespace and `count` agent namespaces, each agent joined to the
    control namespace by its own addressed veth pair, all up."""
    net.check_run_id(run_id)
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"agents {count!r}: at least one")
    control_ns = f"{PREFIX}{run_id}-ctl"
    agent_ns = tuple(f"{PREFIX}{run_id}-a{k}" for k in range(count))
    if present := {control_ns, *agent_ns} & namespaces():
        raise NetlabError(f"namespace {sorted(present)[0]} exists already: a run id is used "
                          "once (an earlier run's leftover goes with cleanup_stale)")
    record = Path(state_dir) / net.RECORD.format(run_id=run_id)
    net._write_record(record, {"version": net.RECORD_VERSION, "run_id": run_id,
                               "namespaces": [control_ns, *agent_ns]})
    made = AgentNet(run_id, record, control_ns, agent_ns, (), ())
    try:
        for ns in (control_ns, *agent_ns):
            _run(["ip", "netns", "add", ns])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        control_addrs, agent_addrs = [], []
        for k, ns in enumerate(agent_ns):
            subnet = net.allocate_subnet(f"{run_id}-ctl-{k}")
            control_side, agent_side = (str(a) for a in list(subnet.hosts())[:2])
            control_dev, agent_dev = _device_names(f"{run_id}-ctl-{k}")
            net.join_pair((control_ns, control_dev, control_side), (ns, agent_dev, agent_side))
            control_addrs.append(control_side)
            agent_addrs.append(agent_side)
        made.control_addrs, made.agent_addrs = tuple(control_addrs), tuple(agent_addrs)
    except BaseException:
        try:
            made.close()
        except NetlabError:
            pass                 # the record stays: cleanup_stale finishes the job
        raise
    return made
