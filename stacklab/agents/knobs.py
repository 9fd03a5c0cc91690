"""The load knob that spreads a run's load over several agents."""

from ..knobs import Knob
from ..netlab.agentnet import MAX_AGENTS

AGENT_KNOBS = [
    Knob("load", "agents", int, 0, "Load agents: the load split among this many Dask "
         "workers, each on a host of its own (a network namespace of the lab's, with "
         "net.mode = \"veth\"), started together and merged into one exact result "
         "(connections shared out evenly; an open loop's arrivals dealt out by index, so "
         "together they send the one-agent schedule); 0: one engine, no agents.",
         min=0, max=MAX_AGENTS),
]


def agents_problem(knobs: dict[str, dict]) -> str | None:
    """Why the trial's load cannot go through local agents, or None: each agent is a
    network namespace of its own, joined to the server's, so the run needs veth."""
    count = knobs["load"].get("agents", 0)
    if count and knobs["net"]["mode"] != "veth":
        return (f"load.agents = {count} runs each agent in a network namespace of its own, "
                "joined to the server's: set net.mode = \"veth\" (on loopback every agent "
                "would be the same host)")
    return None
