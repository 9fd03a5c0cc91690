"""doctor, stacks, workloads: what the lab has."""

from __future__ import annotations

from ..env import Environment
from ..errors import ExitStatus, UsageError
from ..inventory import features, knob_sections, ready, tools
from ..report.listings import (knobs_table, layers_table, print_doctor, print_features,
                                stacks_doc, stacks_table, workloads_table)
from ..stacks import COMPONENTS, STACKS
from ..workloads import WORKLOADS


def doctor(env: Environment) -> ExitStatus:
    """Each component found or not, then each lab feature this machine has or why not;
    ERROR only when the default experiment cannot run (it needs no lab feature)."""
    found = tools()
    print_doctor(found, ready(found), env.stdout)
    print_features(features(), env.stdout)
    return ExitStatus.OK if ready(found) else ExitStatus.ERROR


def stacks(env: Environment, owner: str | None = None, as_json: bool = False) -> ExitStatus:
    """Stacks, front layers and knobs; with `owner`, that component's (or group's) knobs
    only (an unknown one is an error naming the known)."""
    sections = knob_sections()
    if owner is not None:
        known = [s.owner for s in sections]
        if owner not in known:
            raise UsageError(f"COMPONENT {owner!r}: unknown (known: {', '.join(known)})")
        sections = [s for s in sections if s.owner == owner]
    if as_json:
        env.stdout.print_json(data=stacks_doc(STACKS.values(), COMPONENTS.values(), sections))
        return ExitStatus.OK
    if owner is None:
        env.stdout.print(stacks_table(STACKS.values()))
        env.stdout.print(layers_table(COMPONENTS.values()))
    env.stdout.print(knobs_table(sections))
    return ExitStatus.OK


def workloads(env: Environment) -> ExitStatus:
    env.stdout.print(workloads_table(WORKLOADS.values()))
    return ExitStatus.OK
