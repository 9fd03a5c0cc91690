"""doctor, stacks, workloads: what the lab has, as tables or (--json) as documents
described by report/schemas/{doctor,stacks,workloads}.schema.json."""

from __future__ import annotations

from ..env import Environment
from ..errors import ExitStatus, UsageError
from ..inventory import Feature, Tool, features, knob_sections, ready, tools
from ..report.listings import (knobs_table, layers_table, print_doctor, print_features,
                                stacks_doc, stacks_table, workloads_table)
from ..stacks import COMPONENTS, STACKS
from ..workloads import WORKLOADS


SCHEMA_VERSION = 1      # of doctor and workloads --json; bumped when a field changes


def doctor(env: Environment, as_json: bool = False) -> ExitStatus:
    """Each component found or not, then each lab feature this machine has or why not;
    ERROR only when the default experiment cannot run (it needs no lab feature)."""
    found, usable = tools(), features()
    if as_json:
        env.stdout.print_json(data=doctor_doc(found, ready(found), usable))
    else:
        print_doctor(found, ready(found), env.stdout)
        print_features(usable, env.stdout)
    return ExitStatus.OK if ready(found) else ExitStatus.ERROR


def doctor_doc(found: list[Tool], can_run: bool, usable: list[Feature]) -> dict:
    """`doctor --json` (schemas/doctor.schema.json): doctor's two tables as data."""
    return {"schema_version": SCHEMA_VERSION, "ready": can_run,
            "components": [{"name": t.name, "found": t.found, "version": t.version,
                            "install": t.install, "needed": t.needed,
                            "optional": t.optional} for t in found],
            "features": [{"name": f.name, "available": f.available, "detail": f.detail,
                          "knob": f.knob} for f in usable]}


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


def workloads(env: Environment, as_json: bool = False) -> ExitStatus:
    if as_json:
        env.stdout.print_json(data=workloads_doc(WORKLOADS.values()))
    else:
        env.stdout.print(workloads_table(WORKLOADS.values()))
    return ExitStatus.OK


def workloads_doc(workloads) -> dict:
    """`workloads --json` (schemas/workloads.schema.json): what each workload needs and
    deploys (its URLs with their weights in the load), and the named stacks that serve it
    (those that provide all it needs, as a plan is validated)."""
    return {"schema_version": SCHEMA_VERSION, "workloads": [
        {"name": w.name, "description": w.description, "needs": list(w.needs),
         "urls": [{"path": path, "weight": weight} for path, weight in w.urls],
         "database": w.database is not None, "cacheable": w.cacheable,
         # name:VALUE: a size, a count, or a path (dir:PATH)
         "parameter": w.param.kind if w.param else "path" if w.own else None,
         "stacks": [name for name, stack in STACKS.items()
                    if not stack.unmet(w.needs) and not _own_content(stack)]}
        for w in workloads]}


def _own_content(stack) -> bool:
    """A stack whose component serves its own content (a server stacklab did not start:
    its `target`) runs no workload the lab deploys, whatever that workload needs."""
    return any(getattr(COMPONENTS[name], "target", None) for name in stack.components)
