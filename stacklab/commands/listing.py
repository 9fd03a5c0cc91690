"""doctor, stacks, workloads: what the lab has."""

from __future__ import annotations

from ..env import Environment
from ..errors import ExitStatus
from ..inventory import knob_sections, ready, tools
from ..report.listings import (knobs_table, layers_table, print_doctor, stacks_table,
                                workloads_table)
from ..stacks import COMPONENTS, STACKS
from ..workloads import WORKLOADS


def doctor(env: Environment) -> ExitStatus:
    """Each component found or not; ERROR when the default experiment cannot run."""
    found = tools()
    print_doctor(found, ready(found), env.stdout)
    return ExitStatus.OK if ready(found) else ExitStatus.ERROR


def stacks(env: Environment) -> ExitStatus:
    env.stdout.print(stacks_table(STACKS.values()))
    env.stdout.print(layers_table(COMPONENTS.values()))
    env.stdout.print(knobs_table(knob_sections()))
    return ExitStatus.OK


def workloads(env: Environment) -> ExitStatus:
    env.stdout.print(workloads_table(WORKLOADS.values()))
    return ExitStatus.OK
