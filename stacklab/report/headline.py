"""The first thing a reader wants: per workload and concurrency, the answer to the question
each variant asks — a varied knob against its default, front layers against the stack
without them: by how much, how sure, and the layer facts that are the point of the
variant (a cache's hit ratio, a link's measured rate) — and, where trials have no default
to be compared with (a stacks axis: nginx against apache), which won."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable

from ..analysis.analyze import (SERVER_CPU, Bound, Decision, ExperimentView,
                                MetricComparison, TrialSummary)
from ..analysis.answered import WORDS, answer, groups, layer_pairs, lower_is_better, ranked
from ..analysis.recommend import Change, changes, default_of
from ..stacks import REGISTRY, STACKS
from ..analysis.stats import Comparison
from .fmt import change, multiple, number, p_value, ratio_ci, times


def facts(s: TrialSummary, owners: Iterable[str]) -> tuple[str, ...]:
    """What the layers of `owners` measured in trial `s` that a variant of them is about:
    a front layer's hit ratio, the link's measured rate and RTT, the docroot's
    filesystem, the machine profile (where the trial had them)."""
    owners = set(owners)
    out = [f"{layer} hit ratio {fig['hit_ratio'].median:.1%}"
           for layer, fig in s.layers.items()
           if layer in owners and fig.get("hit_ratio") is not None]
    net, fs, machine = (s.conditions.get(k) for k in ("net", "fs", "machine"))
    if "net" in owners and net and net.get("rate_bytes_s"):
        out.append(f"link measured {net['rate_bytes_s'] * 8 / 1e6:,.1f} Mbit/s"
                   + (f", RTT {net['rtt_ms']} ms" if net.get("rtt_ms") else ""))
    if "fs" in owners and fs:
        out.append(f"docroot on {fs['type']}" + (f" ({fs['options']})" if fs.get("options")
                                                 else "")
                   + (", cold cache" if fs.get("cold_cache") else ""))
    if "machine" in owners and machine:
        out.append("machine " + ", ".join(f"{k} {v}" for k, v in machine.items() if v))
    return tuple(out)


@dataclass(frozen=True)
class Answer:
    """One variant against its default, all else equal: a knob's value against the
    knob's default (recommend.changes), or front layers against the stack without them."""

    change: str                  # "php.opcache = False", "varnish in front of nginx"
    against: str                 # "the default (True)", "nginx without it"
    base: TrialSummary
    trial: TrialSummary
    knob: str | None             # None: front layers
    condition: bool              # a lab condition (net, fs, machine, load), not a setting
    facts: tuple[str, ...] = ()  # what the variant's layers measured (hit ratio, link rate)

    @cached_property
    def rps(self) -> MetricComparison:
        """The variant (B) against its default (A) on the metric that answers
        (answered.answer: req/s, or at a fixed rate the server's CPU per request)."""
        return answer(self.base, self.trial)

    @property
    def decision(self) -> Decision:
        return self.rps.decision

    def sentence(self, name=None) -> str:
        """"php.opcache = False: -94.1% req/s vs the default (True) (95% CI 0.05–0.07×,
        p < 0.001), worse" and the facts; `name` names trials in a bound's words."""
        m = answer(self.base, self.trial, name) if name else self.rps
        c, word = m.comparison, WORDS[m.metric]
        if c.ratio is None:
            return f"{self.change}: no {word} to compare with {self.against}"
        said = f"{self.change}: {change(c.ratio - 1)} {word} vs {self.against}"
        if c.ci is not None:
            said += f" (95% CI {ratio_ci(c.ci)}, {_p(c)})"
        said += f", {_verdict(m)}"
        return said + (f" [{'; '.join(self.facts)}]" if self.facts else "")


def _p(c: Comparison) -> str:
    return f"p {p_value(c.p)}" if c.p is not None and c.p < 0.001 else f"p = {p_value(c.p)}"


def _verdict(m: MetricComparison) -> str:
    """The decision (better, worse, same) with what it stands on, or the no-verdict's
    words and reason."""
    d, c = m.decision, m.comparison
    if d.kind == "no-verdict":
        text = m.verdict
        return text if text.startswith("no verdict") else f"no verdict ({d.reason}): {text}"
    said = d.kind
    if m.bound:
        said += f", a bound ({m.bound.relation} {multiple(c.ratio)}): {m.bound.why}"
    if m.reach:
        said += f" ({m.reach.why}, compared round by round)" if c.paired else (
            f" ({m.reach.why})")
    return said


@dataclass(frozen=True)
class Headline:
    workload: str
    concurrency: int
    winner: TrialSummary
    runner_up: TrialSummary | None
    comparison: Comparison | None     # winner against the runner-up (req/s)
    # Each variant against its default (knob values, front layers); the winner and
    # runner-up are then among the trials that are no variant of another (a stacks axis).
    answers: tuple[Answer, ...] = ()

    def sentence(self, name) -> str:
        """The answers, preceded by the winner line where trials remain that have no
        default to be compared with (or where there is no answer)."""
        said = [a.sentence(name) for a in self.answers]
        if not self.answers or self.runner_up:
            said.insert(0, self.winner_sentence(name))
        return "; ".join(said)

    @property
    def decision(self) -> Decision | None:
        """The winner against the runner-up, req/s; None without a runner-up."""
        if not self.runner_up:
            return None
        return answer(self.runner_up, self.winner).decision

    def winner_sentence(self, name) -> str:
        w = name(self.winner)
        if not self.runner_up or not self.comparison:
            return f"{w}: {_figure(self.winner)} (nothing to compare with)"
        m = answer(self.runner_up, self.winner, name)
        c, r, d = m.comparison, name(self.runner_up), m.decision
        both = f"{_figure(self.winner, False)} vs {_figure(self.runner_up)}"
        if c.p is None:
            return (f"{w} and {r}: {both}, no verdict: fewer than 2 successful runs a side")
        if m.metric == SERVER_CPU:
            return _cpu_sentence(w, r, m, both, f"95% CI {ratio_ci(c.ci)}, {_p(c)}")
        interval = f"95% CI {ratio_ci(c.ci)}, {_p(c)}"
        if m.bound:
            return _bounded(w, r, c, m.bound, interval, d)
        if d.kind == "no-verdict":
            hint = ("; more repetitions narrow the interval (repetitions = \"auto\")"
                    if min(c.n) < 6 else "")
            return (f"{w} and {r} are not distinguishable yet "
                    f"({number(self.winner.rps.median)} vs "
                    f"{number(self.runner_up.rps.median)} req/s, ratio {times(c.ratio)}, "
                    f"{interval}): no verdict: {m.imprecise}{hint}")
        if d.kind == "same":
            return (f"{w} and {r} are the same within ±{m.margin:.0%} "
                    f"({number(self.winner.rps.median)} vs "
                    f"{number(self.runner_up.rps.median)} req/s, ratio {times(c.ratio)}, "
                    f"{interval})")
        busy = f"; {m.reach.why}" if m.reach else ""
        return f"{w} wins: {times(c.ratio)} the req/s of {r}, {interval}{busy}"


def _figure(s: TrialSummary, unit: bool = True) -> str:
    """Its answer's figure: req/s, or at a fixed rate its server CPU per request."""
    if lower_is_better(s) and s.server_cpu.median is not None:
        return number(s.server_cpu.median, 1) + (" µs of server CPU per request" if unit
                                                  else "")
    return number(s.rps.median) + (" req/s" if unit else "")


def _cpu_sentence(w: str, r: str, m: MetricComparison, both: str, interval: str) -> str:
    """At a fixed rate: the winner used less server CPU per request (or no verdict)."""
    c, d = m.comparison, m.decision
    if d.kind == "no-verdict":
        why = m.imprecise if d.reason == "imprecise" else (m.bound.why if m.bound
                                                           else d.reason)
        return (f"{w} and {r}: {both}, ratio {times(c.ratio)} ({interval}): no verdict: "
                f"{why}")
    if d.kind == "same":
        return (f"{w} and {r} use the same server CPU per request within ±{m.margin:.0%} "
                f"({both}, ratio {times(c.ratio)}, {interval})")
    return (f"{w} wins: {times(c.ratio)} the server CPU per request of {r} ({both}, "
            f"{interval}), at the same rate asked")


def _bounded(w: str, r: str, c: Comparison, limit: Bound, interval: str,
             d: Decision) -> str:
    """A side limited by the load engine or short of memory: the ratio is a bound."""
    if limit.relation == "≤":
        return (f"no verdict: {w} measured {times(c.ratio)} the req/s of {r} ({interval}), "
                f"but {limit.why}, so the true ratio could be smaller (≤ {times(c.ratio)})")
    if limit.relation == "?":
        return (f"no verdict: {w} measured {times(c.ratio)} the req/s of {r} ({interval}), "
                f"but {limit.why}: the ratio is not a measurement")
    lead = f"{w} wins" if d.kind == "better" else f"no verdict: {w} measured"
    return (f"{lead}: ≥ {times(c.ratio)} the req/s of {r} ({interval}); a bound: "
            f"{limit.why}, so the true ratio could be larger")


def _knob_answer(c: Change, stacks: int, varied: list[str]) -> Answer:
    """A knob's value against its default; which stack and the other knobs' values where
    the group needs them said."""
    where = f" on {c.trial.stack}" if stacks > 1 else ""
    others = [f"{k}={c.base.knobs[k]}" for k in varied if k != c.knob and k in c.base.knobs
              and c.base.knobs[k] != default_of(REGISTRY, k, c.base.stack)]
    context = f" (with {', '.join(others)})" if others else ""
    return Answer(f"{c.knob} = {c.value!r}{where}{context}", f"the default ({c.default!r})",
                  c.base, c.trial, c.knob, c.condition,
                  facts(c.trial, {c.knob.split(".", 1)[0]}))


def _layer_answers(group: list[TrialSummary]) -> list[Answer]:
    """Each trial with front layers against the trial of the stack beneath them with the
    same knobs otherwise (Varnish in front or not)."""
    out = []
    for base, t, own in layer_pairs(group):
        layers = STACKS[t.stack].layers
        replicas = STACKS[t.stack].replicas
        said = (f"{' > '.join(layers)} in front of {base.stack}"
                + (f" ×{replicas}" if replicas > 1 else "")
                + (f" ({', '.join(f'{k}={v}' for k, v in own.items())})" if own else ""))
        out.append(Answer(said, f"{base.stack} without it", base, t, None, False,
                          facts(t, layers)))
    return out


def headlines(view: ExperimentView) -> list[Headline]:
    found = changes(view)
    varied = sorted({c.knob for c in found})
    out = []
    for group in groups(view):
        ids = {s.trial_id for s in group}
        stacks = len({s.stack for s in group})
        answers = [_knob_answer(c, stacks, varied) for c in found if c.trial.trial_id in ids]
        answers += _layer_answers(group)
        variants = {a.trial.trial_id for a in answers}
        roots = [s for s in group if s.trial_id not in variants] or group
        best, second, comp = ranked(roots)
        out.append(Headline(group[0].workload, group[0].concurrency, best, second, comp,
                            tuple(answers)))
    return out
