"""Stack: wire components front → app → database, start them back to front, verify the
whole, and always stop every one of them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import lab
from .errors import StackError, VerificationFailed
from .net import free_port
from .stacks import COMPONENTS, StackDef
from .stacks.base import RenderContext, Started
from .stacks.perl import verify_perl
from .stacks.php import verify_php
from .verify import Status, Verdict, check_content, check_nofile
from .workloads import Deployed

HOST = "127.0.0.1"


@dataclass
class RunningStack:
    stack: StackDef
    started: list[Started] = field(default_factory=list)   # back first, front last

    @property
    def front(self) -> Started:
        return self.started[-1]

    def alive(self) -> bool:
        return all(s.proc.alive() for s in self.started)

    def files(self) -> dict[str, str]:
        return {f"{s.name}/{f}": text for s in self.started for f, text in s.files.items()}

    def log_tail(self) -> str:
        return "\n".join(COMPONENTS[s.name].log_tail(s) for s in self.started)


def start_stack(running: RunningStack, knobs: dict[str, dict[str, Any]], deployed: Deployed,
                run_dir: Path, tls: tuple[Path, Path], cache_dir: Path | None = None,
                run_as: str | None = None, ready_timeout_s: float | None = None) -> None:
    """Start the components back to front into `running` (so that whatever started is
    stopped by stop_stack even if a later one fails); each gets the endpoints of those
    already up."""
    user, group = (None, None) if run_as else lab.server_user()
    wait = {} if ready_timeout_s is None else {"ready_timeout_s": ready_timeout_s}
    groups = {g: knobs[g] for g in running.stack.groups}
    for name in reversed(running.stack.components):
        upstreams = {s.name: s.endpoint for s in running.started}
        ctx = RenderContext(run_dir / name, deployed.docroot, HOST, free_port(HOST), user,
                            group, upstreams, groups, *tls, cache_dir, deployed.database)
        running.started.append(COMPONENTS[name].start(ctx, knobs[name], run_as=run_as,
                                                      **wait))


def stop_stack(running: RunningStack) -> list[str]:
    """Stop front to back; returns what could not be stopped cleanly."""
    errors = []
    for s in reversed(running.started):
        try:
            COMPONENTS[s.name].stop(s)
        except StackError as e:
            errors.append(str(e))
    return errors


def verify_stack(running: RunningStack, deployed: Deployed) -> list[Verdict]:
    """Content through the front, then each component's own claims, then PHP's."""
    front = running.front
    verdicts = check_content(front.endpoint, deployed.expected)
    for s in reversed(running.started):
        verdicts += COMPONENTS[s.name].verify(s, front)
        if s.knobs.get("nofile"):
            verdicts.append(check_nofile(s.name, s.proc.pgid, s.knobs["nofile"]))
    if running.stack.php_sapi:
        verdicts += verify_php(front.endpoint, front.ctx.groups["php"],
                               running.stack.php_sapi, running.stack.php_persistent)
    if running.stack.perl:
        verdicts += verify_perl(front.endpoint, running.stack.perl)
    return verdicts


# A stack's verification: the running stack and its deployment → verdicts.
Verify = Callable[[RunningStack, Deployed], list[Verdict]]


@contextmanager
def lifecycle(running: RunningStack, knobs: dict[str, dict[str, Any]], deployed: Deployed,
              run_dir: Path, tls: tuple[Path, Path] | tuple[None, None] = (None, None),
              cache_dir: Path | None = None, *, what: str | None = None,
              verify: Verify | None = None,
              ready_timeout_s: float | None = None) -> Iterator[tuple[Verdict, ...]]:
    """Start → ready → verify → (the caller measures) → always stop: the one lifecycle of
    every measurement (an experiment's run, a breakdown, a dbbench variant).

    Starts the stack into `running` (the caller keeps it, to read what started, its configs
    and log tails, however it ended), verifies it with `verify` (default verify_stack) and
    yields the verdicts while the caller measures. Nothing is measured when a component
    cannot start (StackError) or a verdict FAILs (VerificationFailed, with every verdict;
    `what` names the stack in its message, default the stack's name). The stack is always
    stopped: stop errors after a measurement that ended normally raise StackError (that
    measurement cannot be trusted); after one that raised, they are noted on its exception,
    which stays the one reported."""
    verify = verify or verify_stack          # looked up at each call
    try:
        start_stack(running, knobs, deployed, run_dir, tls, cache_dir,
                    ready_timeout_s=ready_timeout_s)
        verdicts = tuple(verify(running, deployed))
        failed = [v for v in verdicts if v.status is Status.FAIL]
        if failed:
            raise VerificationFailed(what or running.stack.name, verdicts,
                                     "; ".join(f"{v.check}: {v.detail}" for v in failed))
        yield verdicts
    except BaseException as e:
        if errors := stop_stack(running):
            e.add_note("and stopping the stack: " + "; ".join(errors))
        raise
    if errors := stop_stack(running):
        raise StackError("; ".join(errors))
