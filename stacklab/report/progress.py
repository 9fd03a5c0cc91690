"""The runner's progress on a terminal (runner.Progress drawn with Rich)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

from ..experiment.plan import PlannedRun
from ..store import Outcome, RunRecord


class RichProgress:
    """Runner progress on a Rich bar: current trial, runs done / total, ETA."""

    def __init__(self, out: Console):
        self.out = out
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

    def end(self) -> None:
        self.bar.stop()
