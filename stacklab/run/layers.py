"""A run is a stack of layers, entered in order and always left in reverse: the lab's
conditions (network, machine profile, filesystem), the stack (its own lifecycle), the
checks of what the load will ask, a cold cache, and the measurement itself.

Each layer has one small interface (stacklab.layer.Layer, below the run so that the
layers' own code need not import it) and lives with its own code (netlab/layers.py,
stack.py, verify.py, pageview.py, the runner's measurement); a run, a breakdown or a study
is a composition of the layers it needs (Composition). A FAIL among the verdicts the
layers give before the load stops the run here, and only here: nothing is measured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar

from ..errors import VerificationFailed
from ..layer import Layer
from ..measure.verify import Status, Verdict


def failed(verdicts: Sequence[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.status is Status.FAIL]


class Composition:
    """Layers entered in order (outermost first) and left in reverse, whatever happens.

    `verdicts` holds every verdict given so far (the stored run's, also when one fails);
    `what` names the stack in the error that a FAIL raises (VerificationFailed, with every
    verdict so far and the FAILed ones of the layers just judged as its reason)."""

    def __init__(self, layers: Sequence[Layer], what: str):
        self.layers = tuple(layers)
        self.what = what
        self.verdicts: tuple[Verdict, ...] = ()

    @contextmanager
    def entered(self) -> Iterator[Composition]:
        with ExitStack() as held:
            waiting: list[Layer] = []
            for layer in self.layers:
                held.enter_context(layer.entered())
                if layer.waits:
                    waiting.append(layer)
                    continue
                self._judge([layer, *waiting])
                waiting = []
            if waiting:
                self._judge(waiting)
            yield self

    def _judge(self, layers: list[Layer]) -> None:
        """The one place a FAIL stops a run: the layers' verdicts before the load."""
        given = tuple(v for layer in layers for v in layer.verdicts())
        self.verdicts = (*self.verdicts, *given)
        if bad := failed(given):
            raise VerificationFailed(self.what, self.verdicts,
                                     "; ".join(f"{v.check}: {v.detail}" for v in bad))

    def record(self) -> dict[str, Any]:
        """The layers' parts of the record, outermost first; where two fill one key (the
        filesystem and the cold cache its "_fs"), the outer one's fields come first."""
        out: dict[str, Any] = {}
        for layer in self.layers:
            for key, part in layer.record().items():
                if isinstance(out.get(key), dict) and isinstance(part, dict):
                    out[key] = {**out[key], **part}
                else:
                    out[key] = part
        return out


F = TypeVar("F", bound=Callable[..., Any])


def makes(kind: type[Layer] | Callable[[], type[Layer]]) -> Callable[[F], F]:
    """Names the class of the layer a run's factory makes, so that the plan is checked
    against its rule (problem) before any run, with no list of rules to keep beside the
    run's layers. `kind` may be a function giving the class, for a layer whose module a
    run imports only when it needs it."""
    def named(factory: F) -> F:
        factory.kind = kind  # type: ignore[attr-defined]
        return factory
    return named


def kinds(factories: Iterable[Callable[..., Any]]) -> tuple[type[Layer], ...]:
    """The classes of the layers `factories` make, in their order: a factory that is a
    layer class makes itself, a function names its class (makes); one that names none (a
    test's own layer) has no plan rule."""
    found: list[type[Layer]] = []
    for factory in factories:
        kind = factory if isinstance(factory, type) else getattr(factory, "kind", None)
        if kind is not None:
            found.append(kind if isinstance(kind, type) else kind())
    return tuple(found)


def problems(layers: Sequence[type[Layer] | Layer], knobs: dict[str, dict[str, Any]]
             ) -> tuple[str, str] | None:
    """(layer name, why) for the first of `layers` that refuses the knobs, or None."""
    for layer in layers:
        if problem := layer.problem(knobs):
            return layer.name, problem
    return None
