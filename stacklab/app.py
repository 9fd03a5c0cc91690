"""The names some tests still import from before the commands moved to
stacklab/commands (one module per command family, each command taking an
Environment). Nothing in the package uses this module; it goes once those tests
import from stacklab.commands."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.console import Console

from .commands import results
from .commands.run import load
from .env import Environment

__all__ = ["load", "show", "compare_cmd"]


def _on(out: Console) -> Environment:
    return replace(Environment.default(), stdout=out)


def show(experiment: str | None, db: Path, out: Console) -> None:
    results.show(_on(out), experiment, db)


def compare_cmd(a: str, b: str, db: Path, experiment: str | None, out: Console) -> None:
    results.compare(_on(out), a, b, db, experiment)
