"""doctor, stacks, workloads: what the lab has."""

from __future__ import annotations

from ..env import Environment
from ..errors import ExitStatus
from ..inventory import features, knob_sections, ready, tools
from ..report.listings import (knobs_table, layers_table, print_doctor, print_features,
                                stacks_table, workloads_table)
from ..stacks import COMPONENTS, STACKS
from ..workloads import WORKLOADS


def doctor(env: Environment) -> ExitStatus:
    """Each component found or not, then each lab feature this machine has or why not;
    ERROR only when the default experiment cannot run (it needs no lab feature)."""
    found = tools()
    print_doctor(found, ready(found), env.stdout)
    print_features(features(), env.stdout)
    return ExitStatus.OK if ready(found) else ExitStatus.ERROR


def stacks(env: Environment) -> ExitStatus:
    env.stdout.print(stacks_table(STACKS.values()))
    env.stdout.print(layers_table(COMPONENTS.values()))
    env.stdout.print(knobs_table(knob_sections()))
    return ExitStatus.OK


def workloads(env: Environment) -> ExitStatus:
    env.stdout.print(workloads_table(WORKLOADS.values()))
    return ExitStatus.OK
