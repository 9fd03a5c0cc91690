"""What a layer of a run is, below everything that makes or composes one.

A run is a stack of layers (run/layers.py composes them): the lab's conditions
(netlab/layers.py), the stack (run/stack.py), the checks, a cold cache, the measurement.
The interface lives here, at the root, because the layers live with their own code in
several roles (netlab/ under run/, run/ itself, and later a component's in stacks/):
each imports this module and none imports the run that holds it. It needs only the
verdict types, and describes what a layer reads of the stack it runs under (Running) so
that a lab layer need not import the stack's lifecycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .measure.verify import Verdict


@dataclass(frozen=True)
class Place:
    """Where a run's lab layers are made: the run's id in the session's registry (the
    names of its namespaces, groups and mounts) and the session's state directory (their
    records, which the session's cleanup reads after a kill)."""

    run_id: str
    state_dir: Path


class Running(Protocol):
    """What a layer reads of the stack it runs under (run.stack.RunningStack is one):
    its started components, back first, each with its `label`, its render context
    (`ctx.run_dir`, the directory its cgroup part is named by) and its process
    (`proc.popen.pid`)."""

    @property
    def started(self) -> Sequence[Any]: ...


class Layer(Protocol):
    """One layer of a run.

    - `name`: what its refusals and records are about (a knob group: "net", "fs" …);
    - `problem(knobs)`: what it refuses of a trial's effective knobs before anything
      starts (its plan rule), or None;
    - `entered()`: sets it up (a layer does its work here: the measurement measures) and
      always tears it down, after the layers inside it;
    - `waits`: its verdicts judge the servers it runs under (the docroot's filesystem in
      their view, their cgroups), so they are judged once the next layer that does not
      wait (the stack) is up, with that layer's;
    - `verdicts()`: what it found, asked once it is entered (and, if it waits, the
      servers are up); a FAIL stops the run before the load;
    - `record()`: its own part of the run's record (resources keys), read once the
      innermost layer is done, while every layer is still up.
    """

    name: str
    waits: bool

    def problem(self, knobs: dict[str, dict[str, Any]]) -> str | None: ...

    def entered(self) -> AbstractContextManager[Any]: ...

    def verdicts(self) -> tuple[Verdict, ...]: ...

    def record(self) -> dict[str, Any]: ...
