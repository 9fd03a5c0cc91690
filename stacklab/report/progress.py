"""The runner's progress on a terminal (runner.Progress drawn with Rich)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

from ..experiment.plan import PlannedRun
from ..store import Outcome, RunRecord


class RichProgress:
    """Runner progress on a Rich bar: current trial, runs done / total, ETA. Piped (no
    terminal to redraw a bar on), a line per run and per step within one instead."""

    def __init__(self, out: Console):
        self.out = out
        self.lines = not out.is_terminal
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=out)
        self.task = None

    def begin(self, total: int, done: int) -> None:
        self.bar.start()
        self.task = self.bar.add_task("starting", total=total, completed=done)
        if done:
            self.out.print(f"resuming: {done} of {total} runs already stored")

    def note(self, text: str) -> None:
        self.out.print(f"note: {text}", markup=False, highlight=False, soft_wrap=True)

    def detail(self, text: str) -> None:
        """What a run is doing (a capacity step): the bar's description on a terminal, a
        line when piped."""
        if self.lines:
            self.out.print(f"  {text}", markup=False, highlight=False, soft_wrap=True)
        elif self.task is not None:
            self.bar.update(self.task, description=text)

    def extend(self, more: int) -> None:
        task = self.bar.tasks[0]
        self.bar.update(self.task, total=(task.total or 0) + more)

    def run_started(self, run: PlannedRun) -> None:
        self.bar.update(self.task, description=f"{run.trial.label()} #{run.repetition}")

    def run_finished(self, run: PlannedRun, record: RunRecord) -> None:
        if record.outcome is not Outcome.OK:
            self.out.print(f"[red]{record.outcome}[/red] {run.trial.label()} "
                           f"#{run.repetition}: {record.reason}")
        elif record.reason:      # a note on a measured run (logs not kept, …)
            self.out.print(f"note: {run.trial.label()} #{run.repetition}: {record.reason}",
                           markup=False, highlight=False)
        self.bar.advance(self.task)
        if self.lines:
            task = self.bar.tasks[0]
            rps = f": {record.load.rps:,.0f} req/s" if record.load else ""
            self.out.print(f"[{task.completed:.0f}/{task.total:.0f}] {run.trial.label()} "
                           f"#{run.repetition} {record.outcome}{rps} "
                           f"({task.elapsed or 0:.0f} s)", markup=False, highlight=False)

    def end(self) -> None:
        self.bar.stop()
