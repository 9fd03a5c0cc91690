"""Progress where no terminal redraws a bar (a pipe, a CI log): a line per run and per
step within one (a capacity search's), so a long experiment shows it is alive."""

from __future__ import annotations

import io

from rich.console import Console

from stacklab.experiment.plan import PlannedRun, make_plan
from stacklab.experiment.spec import parse_spec
from stacklab.report.progress import RichProgress
from stacklab.stacks import STACKS
from stacklab.store import Outcome, RunRecord

from fakes import fake_report


def test_piped_progress_prints_a_line_per_run_and_per_step(spec_args):
    doc = {"experiment": {"name": "p", "repetitions": 2, "requests": 10},
           "matrix": {"stack": ["nginx"], "workload": ["static-page"], "concurrency": [1]}}
    plan = make_plan(parse_spec(doc, "p.toml", *spec_args), STACKS)
    out = io.StringIO()
    progress = RichProgress(Console(file=out, width=100))     # a file: no terminal
    progress.begin(len(plan.runs), 0)
    for run in plan.runs:
        progress.run_started(run)
        progress.detail("capacity search at 1,000 req/s for 5 s: pass (p99 3 ms ≤ 50 ms)")
        progress.run_finished(run, RunRecord(
            experiment_id=1, trial_id=run.trial.id, repetition=run.repetition,
            outcome=Outcome.OK, started_at="t", ended_at="t", knobs={}, versions={},
            configs={}, load=fake_report(1234.0, 800, seed=run.repetition)))
    progress.end()
    lines = out.getvalue().splitlines()
    runs = [line for line in lines if line.startswith("[")]
    assert [line.split(" (")[0] for line in runs] == [
        f"[{k}/2] nginx static-page c=1 #{k} ok: 1,234 req/s" for k in (1, 2)]
    assert sum("capacity search at 1,000 req/s" in line for line in lines) == 2


def test_on_a_terminal_a_step_is_the_bars_description(spec_args):
    out = io.StringIO()
    progress = RichProgress(Console(file=out, width=100, force_terminal=True))
    progress.begin(1, 0)
    progress.detail("capacity probe")
    assert progress.bar.tasks[0].description == "capacity probe"
    progress.end()
    assert not [line for line in out.getvalue().splitlines() if line.startswith("[1/1]")]
