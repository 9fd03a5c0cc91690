"""Stack: wire components front → app → database, start them back to front, verify the
whole, read their counters, and always stop every one of them.

Nothing here knows a component by name: each says what it provides (capabilities, with
the probes they put in the docroot and the verifiers that check them), what its knobs
expect in the docroot, and what it counts; components in front find their upstream by
what it provides.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from ..host import lab
from ..errors import StackError, StacklabError, VerificationFailed
from ..host.net import Endpoint, free_port
from ..stacks import COMPONENTS, StackDef
from ..stacks.base import Capability, RenderContext, RunningComponent, Upstream
from ..stacks.limits import verify_limits
from ..measure.verify import Status, Verdict, check_content
from ..workloads import Deployed, place

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Site:
    """Where a run's servers live: the address they listen on (loopback, or the server's
    end of a veth pair) and the cgroup they join before exec (a machine profile)."""

    host: str = HOST
    join: Callable[[], None] | None = None


@dataclass
class RunningStack:
    stack: StackDef
    started: list[RunningComponent] = field(default_factory=list)   # back first, front last
    placed: list[Path] = field(default_factory=list)       # files put into the docroot

    @property
    def front(self) -> RunningComponent:
        return self.started[-1]

    def own_front(self, of: RunningComponent) -> RunningComponent:
        """The front of the stack behind the front layers, in the replica of `of` (a
        front layer: the whole stack's front): where a component's probes are asked,
        so that no cache answers them and each replica checks its own database."""
        if of.name in self.stack.layers:
            return self.front
        _, dot, replica = of.label.partition(".")
        label = self.stack.base[0] + (f".{replica}" if dot else "")
        return next(s for s in self.started if s.label == label)

    def alive(self) -> bool:
        return all(s.proc.alive() for s in self.started)

    def files(self) -> dict[str, str]:
        return {f"{s.label}/{f}": text for s in self.started for f, text in s.files.items()}

    def log_tail(self) -> str:
        return "\n".join(COMPONENTS[s.name].log_tail(s) for s in self.started)

    def capabilities(self) -> list[tuple[Capability, RunningComponent]]:
        """What the running components provide with their knobs, and which provides it
        (front first)."""
        return [(cap, s) for s in reversed(self.started)
                for cap in COMPONENTS[s.name].capabilities(s.knobs)]


def start_stack(running: RunningStack, knobs: dict[str, dict[str, Any]], deployed: Deployed,
                run_dir: Path, tls: tuple[Path, Path], cache_dir: Path | None = None,
                run_as: str | None = None, ready_timeout_s: float | None = None,
                site: Site = Site()) -> None:
    """Put what the stack needs into the docroot, then start the components back to front
    into `running` (so that whatever started is stopped by stop_stack even if a later one
    fails): each replica of the stack behind its front layers, its components given the
    ones already up in that replica as their upstreams; then the front layers, each given
    the fronts of what is behind it (every replica's) as its backends."""
    stack = running.stack
    start = partial(_start, running, knobs, deployed, run_dir, tls, cache_dir, run_as,
                    ready_timeout_s, site)
    _place(running, knobs, deployed.docroot)
    backends = []
    for replica in range(1, stack.replicas + 1):
        mine: list[RunningComponent] = []
        for name in reversed(stack.base):
            label = name if stack.replicas == 1 else f"{name}.{replica}"
            mine.append(start(name, label, upstreams=_upstreams(mine)))
        backends.append(mine[-1].endpoint)
    for name in reversed(stack.layers):
        backends = [start(name, name, backends=tuple(backends)).endpoint]


def _upstreams(started: list[RunningComponent]) -> tuple[Upstream, ...]:
    return tuple(Upstream(s.name, s.endpoint, tuple(
        cap.name for cap in COMPONENTS[s.name].capabilities(s.knobs))) for s in started)


def _start(running: RunningStack, knobs: dict[str, dict[str, Any]], deployed: Deployed,
           run_dir: Path, tls: tuple[Path, Path], cache_dir: Path | None,
           run_as: str | None, ready_timeout_s: float | None, site: Site, name: str,
           label: str,
           upstreams: tuple[Upstream, ...] = (),
           backends: tuple[Endpoint, ...] = ()) -> RunningComponent:
    """Start one component (or replica of one) in its own run directory and port."""
    user, group = (None, None) if run_as else lab.server_user()
    wait = {} if ready_timeout_s is None else {"ready_timeout_s": ready_timeout_s}
    groups = {g: knobs[g] for g in running.stack.groups}
    ctx = RenderContext(run_dir / label, deployed.docroot, site.host, free_port(site.host),
                        user, group, upstreams, groups, *tls, cache_dir, deployed.database,
                        backends, site.join)
    started = COMPONENTS[name].start(ctx, knobs[name], run_as=run_as, **wait)
    started.label = label
    running.started.append(started)
    return started


def _place(running: RunningStack, knobs: dict[str, dict[str, Any]], docroot: Path) -> None:
    """The probes of what the stack provides, and the files its components' knobs expect
    (Apache's .htaccess), into the docroot for as long as the stack runs."""
    files: dict[str, tuple[bytes, int]] = {}
    for name in running.stack.components:
        component = COMPONENTS[name]
        for cap in component.capabilities(knobs[name]):
            files.update({p.path: (p.content, p.mode) for p in cap.probes})
    for path, (content, mode) in files.items():
        running.placed.append(place(docroot, path, content, mode))
    for name in running.stack.components:     # after the probes: their directories too
        for path, content in COMPONENTS[name].docroot_files(docroot, knobs[name]).items():
            running.placed.append(place(docroot, path, content))


def stop_stack(running: RunningStack) -> list[str]:
    """Stop front to back, then take back what was placed in the docroot; returns what
    could not be stopped cleanly."""
    errors = []
    for s in reversed(running.started):
        try:
            COMPONENTS[s.name].stop(s)
        except StackError as e:
            errors.append(str(e))
    for path in running.placed:
        path.unlink(missing_ok=True)
    running.placed.clear()
    return errors


def verify_stack(running: RunningStack, deployed: Deployed) -> list[Verdict]:
    """Content through the front, then each component's own claims and process limits,
    then each capability the stack provides, by its own verifier — those through the
    stack's own front, behind any cache (a cached page would not reach the database)."""
    verdicts = check_content(running.front.endpoint, deployed.expected, deployed.php_log)
    for s in reversed(running.started):
        verdicts += _named(s, COMPONENTS[s.name].verify(s, running.own_front(s)))
        verdicts += verify_limits(s.label, s.proc.pgid, s.knobs)
    for cap, provider in running.capabilities():
        if cap.verify:
            verdicts += _named(provider, cap.verify(provider, running.own_front(provider)))
    return verdicts


def _named(started: RunningComponent, verdicts: list[Verdict]) -> list[Verdict]:
    """A replica's verdicts name it (apache.2), so a FAIL says which one."""
    return [replace(v, component=started.label) if v.component == started.name else v
            for v in verdicts]


def stack_counters(running: RunningStack) -> dict[str, dict[str, float]]:
    """Each running component's own counters now (component -> {counter: number}), read
    from its status source. A component without one is absent, and so is one whose source
    could not be read (a server that died shows in `running.alive()`, not here)."""
    out = {}
    for s in running.started:
        try:
            found = COMPONENTS[s.name].counters(s)
        except (OSError, ValueError, StackError, http.client.HTTPException):
            continue
        if found:
            out[s.label] = found
    return out


def counters_delta(before: dict[str, dict[str, float]],
                   after: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """What each component counted between two readings of stack_counters (the counters
    read both times)."""
    return {name: {k: after[name][k] - v for k, v in counts.items() if k in after[name]}
            for name, counts in before.items() if name in after}


# A stack's verification: the running stack and its deployment → verdicts.
Verify = Callable[[RunningStack, Deployed], list[Verdict]]


@contextmanager
def lifecycle(running: RunningStack, knobs: dict[str, dict[str, Any]], deployed: Deployed,
              run_dir: Path, tls: tuple[Path, Path] | tuple[None, None] = (None, None),
              cache_dir: Path | None = None, *, what: str | None = None,
              verify: Verify | None = None, ready_timeout_s: float | None = None,
              site: Site = Site()) -> Iterator[tuple[Verdict, ...]]:
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
                    ready_timeout_s=ready_timeout_s, site=site)
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


@dataclass(eq=False)
class StackLayer:
    """The stack's lifecycle as a layer of a run (stacklab.run.layers): started into
    `running`, ready and verified when entered (a FAIL among its own verdicts raises
    there, as lifecycle says), always stopped when left. What it runs on is read from
    the layers outside it when it is entered: `deployed` (the docroot, on the run's
    filesystem) and `site` (the network's address, the machine profile's group).
    `verify` and `ready_timeout_s` are lifecycle's (a dbbench variant's own check)."""

    running: RunningStack
    knobs: dict[str, dict[str, Any]]
    run_dir: Path
    deployed: Callable[[], Deployed]
    site: Callable[[], Site] = Site
    tls: tuple[Path, Path] | tuple[None, None] = (None, None)
    cache_dir: Path | None = None
    what: str | None = None
    verify: Verify | None = None
    ready_timeout_s: float | None = None
    name = "stack"
    waits = False
    given: tuple[Verdict, ...] = ()

    @classmethod
    def problem(cls, knobs: dict[str, dict[str, Any]]) -> str | None:
        return None          # the stack's rules need its definition: refusal()

    @staticmethod
    def refusal(stack: StackDef, knobs: dict[str, dict[str, Any]]) -> tuple[str, str] | None:
        """(component, why) when a component refuses its knobs, or a front layer cannot
        split what is behind it or speak to it (front_layers_problem)."""
        for name in stack.components:
            if problem := COMPONENTS[name].problem(knobs[name]):
                return name, problem
        return front_layers_problem(stack, knobs)

    @contextmanager
    def entered(self) -> Iterator[tuple[Verdict, ...]]:
        with lifecycle(self.running, self.knobs, self.deployed(), self.run_dir, self.tls,
                       self.cache_dir, what=self.what, verify=self.verify,
                       ready_timeout_s=self.ready_timeout_s, site=self.site()) as self.given:
            yield self.given

    def verdicts(self) -> tuple[Verdict, ...]:
        return self.given

    def record(self) -> dict[str, Any]:
        return {}


def front_layers_problem(stack: StackDef, knobs: dict[str, dict]) -> tuple[str, str] | None:
    """(layer, why) when a front layer cannot split what is behind it as its knobs say —
    as many weights as backends: the replicas for the layer in front of them, one for
    the others — or cannot speak to it: HTTPS behind a layer that speaks only HTTP
    (Varnish, Squid), HTTP/1.1 on a unix socket only (nginx's h2c port) behind a layer
    that reaches its backends over TCP only (Squid)."""
    behind = (*stack.layers[1:], stack.base[0])
    for layer, next_one in zip(stack.layers, behind):
        try:
            COMPONENTS[layer].shares(knobs[layer], stack.backends(layer))
        except StacklabError as e:
            return layer, str(e)
        if knobs[next_one].get("tls") and not COMPONENTS[layer].tls_to_backends:
            https = ", ".join(n for n, c in COMPONENTS.items() if c.layer and c.tls_to_backends)
            return layer, (f"{layer} speaks plain HTTP to what is behind it, and "
                           f"{next_one}.tls is on; leave {next_one}.tls off (TLS in front "
                           f"of {layer} is not built), or put a layer that speaks HTTPS to "
                           f"its backends there ({https})")
        if (why := COMPONENTS[next_one].http1_on_unix_only(knobs[next_one])) \
                and not COMPONENTS[layer].unix_to_backends:
            unix = ", ".join(n for n, c in COMPONENTS.items() if c.layer and c.unix_to_backends)
            return layer, (f"{layer} reaches what is behind it over TCP only, and {why}: "
                           f"its HTTP/1.1 is on a unix socket; put a layer that reaches one "
                           f"there ({unix})")
    return None
