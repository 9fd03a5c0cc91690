"""What `stacklab run` checks of an external server before anything runs: the target rule
(a remote host only with the user's --allow-remote) and that each path answers 200 —
refused with one line, nothing started, nothing stored. Each run verifies again (the
server may have gone meanwhile): adapter.External.verify."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...errors import SpecError, VerificationFailed
from ...measure.verify import Status
from .adapter import path_verdicts
from .knobs import COMPONENT
from .target import origin, remote_problem


def _targets(spec: Any) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """(where, url, paths) of each external server the experiment names: in [external]
    or, as a knob axis, under [matrix.external]."""
    fixed, axes = spec.fixed_knobs, spec.axes
    urls = axes.get(f"{COMPONENT}.url") or (fixed.get(f"{COMPONENT}.url"),)
    where = f"matrix.{COMPONENT}.url" if f"{COMPONENT}.url" in axes else f"{COMPONENT}.url"
    for paths in axes.get(f"{COMPONENT}.paths") or (fixed.get(f"{COMPONENT}.paths", ["/"]),):
        for url in urls:
            if url:
                yield where, url, tuple(paths)


def check_targets(spec: Any, allow_remote: bool) -> None:
    """Refuse a url whose host is not loopback unless the user passed --allow-remote (a
    SpecError naming external.url and the flag)."""
    for where, url, _ in _targets(spec):
        if problem := remote_problem(url, allow_remote):
            raise SpecError(spec.path, where, url, problem)


def verify_targets(spec: Any) -> None:
    """Every path of every external server answers 200 now, or VerificationFailed (one
    line naming each URL at fault: its status, or why nothing answered)."""
    for _, url, paths in _targets(spec):
        verdicts = tuple(path_verdicts(origin(url), list(paths)))
        if bad := [v for v in verdicts if v.status is Status.FAIL]:
            raise VerificationFailed(f"external server {url}", verdicts,
                                     "; ".join(f"{v.check}: {v.detail}" for v in bad))
