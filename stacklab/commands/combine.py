"""combine: S1's last step. An experiment's significant single-knob winners set
together, every subset measured side by side against the defaults in a new experiment
(validated whole before anything starts), and whether the gains add up."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from ..host import lab
from ..analysis.analyze import load_view
from ..methods.combine import Additivity, Group, additivity, combined_doc, support, winners
from ..env import Environment
from ..errors import ExitStatus, NotFound, UsageError
from ..experiment.plan import make_plan
from ..report.fmt import p_value, ratio_ci, times
from ..report.progress import RichProgress
from ..run.runner import plan_hash, run_experiment
from ..experiment.spec import parse_spec
from ..stacks import REGISTRY, STACKS
from ..store import Store, stored
from ..run.validate import SpecOrigin, check_installed, validate_plan
from ..workloads import WORKLOADS
from .run import logs_dir


def combine(env: Environment, experiment: str | None, db: Path | None, repetitions: int,
            dry_run: bool) -> ExitStatus:
    if not 2 <= repetitions <= 100:
        raise UsageError(f"--repetitions {repetitions}: expected 2..100 (an interval "
                         "needs at least 2 runs a side)")
    db = env.database(db)
    with stored(db) as store:
        view = load_view(store, experiment)
        spec_doc = store.experiment(view.id).spec
    groups = winners(view, REGISTRY)
    out = env.stdout
    if not groups:
        out.print(f"{view.name}: no knob value beat its default significantly on req/s: "
                  "nothing to combine", markup=False, highlight=False)
        return ExitStatus.OK
    planned = []
    for i, g in enumerate(groups, 1):
        name = f"{view.name}-combined" + (f"-{i}" if len(groups) > 1 else "")
        description = (f"The significant winners of {view.name} (experiment {view.id}) on "
                       f"{g.stack} {g.workload} c={g.concurrency}, every subset against "
                       "the defaults")
        doc = combined_doc(spec_doc, g, name, description, repetitions)
        spec = parse_spec(doc, f"{view.name} (combined)", REGISTRY, STACKS, set(WORKLOADS))
        plan = make_plan(spec, STACKS)
        validate_plan(plan, SpecOrigin(spec))
        planned.append((g, spec, plan))
        print_winners(env, g, name, len(plan.runs))
    if dry_run:
        return ExitStatus.OK
    check_installed(sorted({c for _, _, p in planned for c in p.components(STACKS)}),
                    engine=True)
    lab.check_root(env.lab_root)
    store = Store.open(db)
    try:
        for g, spec, plan in planned:
            name = spec.experiment.name
            try:
                resume = store.experiment(name).spec_hash == plan_hash(plan)
            except NotFound:
                resume = False
            run_experiment(env, spec, plan, REGISTRY, store, logs_dir(db), resume,
                           RichProgress(env.stdout))
            combined = load_view(store, name)
            print_additivity(env, g, additivity(combined, g, REGISTRY), combined)
    finally:
        store.close()
    return ExitStatus.OK


def print_winners(env: Environment, g: Group, name: str, runs: int) -> None:
    out = env.stdout
    out.print(f"{name}: {g.stack} {g.workload} c={g.concurrency}: "
              f"{len(g.winners)} winner(s), {2 ** len(g.winners)} trials, {runs} runs",
              markup=False, highlight=False)
    for w in g.winners:
        c = w.comparison
        out.print(f"  {w.knob} = {w.value!r} (default {w.default!r}): {times(c.ratio)} "
                  f"[{ratio_ci(c.ci)}] alone (trial {w.trial})", markup=False, highlight=False)
    for w in g.left_out:
        out.print(f"  left out (past the {len(g.winners)} strongest): {w.knob} = {w.value!r}"
                  f" {times(w.comparison.ratio)}", markup=False, highlight=False)


def print_additivity(env: Environment, g: Group, a: Additivity | str, view) -> None:
    out = env.stdout
    if isinstance(a, str):
        out.print(f"{view.name}: {a}", markup=False)
        return
    table = Table(title=f"{view.name}: do the gains add up? (req/s, B/A against the "
                        "defaults, measured side by side)")
    for col in ("change", "B/A", "95% CI", "p"):
        table.add_column(col, justify="left" if col == "change" else "right")
    for knob, c in a.singles.items():
        table.add_row(f"{knob} alone", times(c.ratio), ratio_ci(c.ci), p_value(c.p))
    table.add_row("product of the single gains", times(a.expected), "", "")
    c = a.combined
    table.add_row("all together", times(c.ratio), ratio_ci(c.ci), p_value(c.p))
    out.print(table)
    out.print(f"verdict: {a.verdict}", markup=False, highlight=False)
    combo = next((s for s in view.summaries if all(
        s.knobs.get(w.knob) == w.value for w in g.winners)), None)
    left = support(combo, view, REGISTRY).unsupported if combo is not None else ()
    if combo is not None:
        out.print(f"its configuration, with why each setting: stacklab export-config "
                  f"{combo.trial_id} -e {view.name} -o DIR" + (
                      f" (no verdict here supports {', '.join(left)}: it writes only what "
                      "one supports, or nothing; --unsupported writes them all, marked)"
                      if left else ""), markup=False, highlight=False)
