"""Text output (Rich) of what the lab has and what it is about to do: doctor's
inventory, the stacks with every knob, the workloads, and the dry-run plan. The data
comes from stacklab/inventory.py and the plan; this only lays it out."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..inventory import Feature, KnobSection, Tool
from ..experiment.plan import Plan, TimeEstimate
from ..experiment.spec import (CONFIRM_STEPS, LONGEST_STEP, PROFILE_STEPS, REMEASURES,
                               ExperimentSpec)
from ..stacks.compose import UNAVAILABLE


def doctor_table(tools: list[Tool]) -> Table:
    table = Table(title="stacklab doctor")
    for col in ("component", "status", "version", "install with"):
        table.add_column(col)
    for t in tools:
        status = ("[green]found[/green]" if t.found else
                  "[yellow]missing[/yellow]" if t.optional else "[red]missing[/red]")
        table.add_row(f"{t.name} ({t.role})" if t.role else t.name, status,
                      escape(t.version or ""), "" if t.found else t.install)
    return table


def print_doctor(tools: list[Tool], ready: bool, out: Console) -> None:
    out.print(doctor_table(tools))
    out.print("the default experiment can run" if ready else
              "[red]the default experiment cannot run: install what is missing[/red]")


def features_table(features: list[Feature]) -> Table:
    """What the lab's layers can use here: a "no" is a note (yellow), not a problem."""
    table = Table(title="lab features")
    for col in ("feature", "available", "why not, or what it uses", "knob"):
        table.add_column(col)
    for f in features:
        table.add_row(f.name, "[green]yes[/green]" if f.available else "[yellow]no[/yellow]",
                      escape(f.detail), f.knob or "—")
    return table


def print_features(features: list[Feature], out: Console) -> None:
    out.print(features_table(features))
    if not all(f.available for f in features):
        out.print("what is missing refuses only the experiments whose knobs need it")


def stacks_table(stacks) -> Table:
    table = Table(title="stacks")
    table.add_column("stack")
    table.add_column("components (front first)")
    table.add_column("description")
    for s in stacks:
        table.add_row(s.name, " → ".join(s.components), s.description)
    return table


def layers_table(components) -> Table:
    """Front layers: what each is, and how it is written in front of a stack."""
    table = Table(title="front layers (in front of any stack or layer: "
                        "'varnish > nginx+php-fpm', 'haproxy > apache * 3')")
    for col in ("layer", "kind", "over replicas", "example, or why not here"):
        table.add_column(col)
    for c in components:
        if c.layer is None:
            continue
        example = f"{c.name} > apache * 2" if c.balances else f"{c.name} > nginx+php-fpm"
        table.add_row(c.name, c.layer, "balances" if c.balances else "one backend", example)
    for name, why in UNAVAILABLE.items():
        table.add_row(name, "not here", "", why)
    return table


def knobs_table(sections: list[KnobSection]) -> Table:
    table = Table(title="knobs")
    widest = max((len(k.key) for s in sections for k in s.knobs), default=4)
    table.add_column("knob", no_wrap=True, min_width=widest)    # never cut a knob's name
    for col in ("type", "default", "allowed", "meaning", "from"):
        table.add_column(col)
    for section in sections:
        if section.heading is not None:
            table.add_section()
            table.add_row(f"[bold]{section.owner}[/bold] {escape(section.heading)}",
                          "", "", "", "", "")
        for k in section.knobs:
            allowed = ", ".join(map(str, k.choices)) if k.choices else (
                f"{_bound(k.min, k.type)}..{_bound(k.max, k.type)}"
                if k.min is not None and k.max is not None else "")
            table.add_row(k.key, k.type.__name__, str(k.default), allowed, k.meaning, k.source)
    return table


def workloads_table(workloads) -> Table:
    table = Table(title="workloads")
    for col in ("workload", "needs", "URLs", "description"):
        table.add_column(col)
    for w in workloads:
        table.add_row(w.name, ", ".join(w.needs) or "any server", str(len(w.urls)),
                      w.description)
    return table


def print_notes(notes: list[str], out: Console) -> None:
    """Knobs set where they cannot act in some trials, said before anything runs."""
    for note in notes:
        out.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)


def plan_table(spec: ExperimentSpec, plan: Plan) -> Table:
    table = Table(title=f"plan: {spec.experiment.name}")
    for col in ("trial", "stack", "workload", "c", "knobs"):
        table.add_column(col)
    for t in plan.trials:
        table.add_row(t.id, t.stack, t.workload, str(t.concurrency),
                      " ".join(f"{k}={v}" for k, v in t.knobs) or "defaults")
    return table


def print_plan(spec: ExperimentSpec, plan: Plan, out: Console,
               estimate: TimeEstimate | None = None) -> None:
    out.print(plan_table(spec, plan))
    e, estimate = spec.experiment, estimate or plan.estimate(spec)
    out.print(f"{len(plan.trials)} trials × {e.first_repetitions} repetitions = "
              f"{len(plan.runs)} runs, {estimate_words(e, estimate)}", soft_wrap=True)
    out.print(overhead_words(plan, estimate), style="dim", soft_wrap=True)
    if (c := spec.capacity) is not None:
        out.print(search_words(c, e.duration or 0.0, e.warmup), soft_wrap=True)
    if e.auto:
        out.print(f"repetitions = auto: more rounds until each trial's req/s CI half-width is "
                  f"under {e.ci_target:.0%}, at most {e.max_repetitions} repetitions "
                  f"({plan.max_runs(spec)} runs)")


def search_words(c, duration_s: float, warmup_s: float) -> str:
    """What bounds one capacity search, and its longest time."""
    return (f"each search: the probe, at most {c.max_steps} steps of {c.step:g} s (an "
            f"undecided one doubled up to {LONGEST_STEP * c.step:g} s), {PROFILE_STEPS} "
            f"profile steps, at most {CONFIRM_STEPS} confirmations of {duration_s:g} s and "
            f"at most {REMEASURES} steps measured again for a busy host: at most "
            f"{duration_words(c.most_s(duration_s, warmup_s))} of load a search")


def duration_words(seconds: float) -> str:
    """"54 s", "3 min 22 s"."""
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def estimate_words(e, estimate: TimeEstimate) -> str:
    """"typically 54 s, up to 3 min 22 s if a busy host has runs measured again (2 a
    trial, experiment.remeasure)"."""
    said = f"estimated {duration_words(estimate.typical_s)} typically"
    if estimate.most_s > estimate.typical_s:
        said += (f", up to {duration_words(estimate.most_s)} if "
                 + ("every search takes its longest and " if estimate.searches else "")
                 + f"a busy host has runs measured again ({e.remeasure} a trial, "
                 "experiment.remeasure"
                 + (", each after --wait-quiet's wait" if estimate.wait_s else "") + ")")
    return said


def overhead_words(plan: Plan, estimate: TimeEstimate) -> str:
    """What each run costs besides its warm-up and load, and where that figure is from."""
    o = estimate.overhead
    stacks = sorted({t.stack for t in plan.trials})
    each = ", ".join(f"{s} {o.of(s):.1f} s" for s in stacks)
    return (f"a run's start, verification and stop beside its load: {each} ("
            + (f"the mean of {o.runs} stored runs of this host"
               + ("" if all(s in o.by_stack for s in stacks) else "; a stack none of them "
                  "ran: the larger of that and the lab's guess") if o.runs else
               "the lab's guess: no stored run to measure it by") + ")")


def _bound(value: float, kind: type) -> str:
    """A range's end as its knob's type writes it: 1048576, not 1.04858e+06."""
    return str(int(value)) if kind is int else f"{value:g}"


def stacks_doc(stacks, components, sections) -> dict:
    """`stacks --json` (schemas/stacks.schema.json): named stacks, front layers, knobs."""
    return {
        "stacks": [{"name": s.name, "components": list(s.components),
                    "description": s.description} for s in stacks],
        "layers": [{"name": c.name, "kind": c.layer, "balances": c.balances}
                   for c in components if c.layer is not None],
        "knobs": [{"key": k.key, "type": k.type.__name__, "default": k.default,
                   "choices": list(k.choices), "min": k.min, "max": k.max,
                   "meaning": k.meaning, "source": k.source}
                  for section in sections for k in section.knobs],
    }
