"""The `stacklab` command: parse, call one library function, map errors to exit codes."""

from __future__ import annotations

import functools
import os
import sqlite3
import sys
from enum import Enum
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.console import Console

from . import app as lab_app
from .errors import StacklabError, printable

DEFAULT_DB = Path("results/stacklab.db")

cli = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="stacklab: a performance lab for web stacks.")
# Piped output (make demo | tee, CI logs) gets room for the whole table.
out = Console(width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True)

DbOpt = typer.Option(DEFAULT_DB, "--db", help="Results database (SQLite).")


def guarded(fn: Callable) -> Callable:
    """The one error boundary: a StacklabError becomes one line and its exit code."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:             # `stacklab show | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except (StacklabError, OSError, sqlite3.Error) as e:
            if "--traceback" in sys.argv:
                raise
            message = str(e) if isinstance(e, StacklabError) else (
                f"results database: {e}" if isinstance(e, sqlite3.Error) else
                f"{e.filename}: {e.strerror}" if e.filename else str(e))
            err.print(f"stacklab: error: {printable(message)}", markup=False, highlight=False,
                      soft_wrap=True)
            raise typer.Exit(getattr(e, "exit_code", 1)) from None
    return wrapper


@cli.callback()
def _options(traceback: bool = typer.Option(False, "--traceback",
                                            help="Show the full traceback on errors.")):
    """stacklab: a performance lab for web stacks."""


@cli.command()
@guarded
def doctor() -> None:
    """Check every component: found or not, version, the apt package to install."""
    ok = lab_app.doctor(out)
    raise typer.Exit(0 if ok else 1)


@cli.command()
@guarded
def run(spec: Path = typer.Argument(..., help="Experiment file (TOML)."),
        db: Path = DbOpt,
        resume: bool = typer.Option(False, "--resume", help="Complete the newest experiment "
                                    "of this name without redoing finished runs."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, start nothing.")
        ) -> None:
    """Run an experiment: plan, start real stacks, verify, load, store each run."""
    lab_app.run(spec, db, resume, dry_run, out)


@cli.command()
@guarded
def show(experiment: Optional[str] = typer.Argument(None, help="Name or id (default: newest)."),
         db: Path = DbOpt) -> None:
    """Text table of an experiment's results."""
    lab_app.show(experiment, db, out)


@cli.command()
@guarded
def report(experiment: Optional[str] = typer.Argument(None, help="Name or id (default: newest)."),
           output: Path = typer.Option(Path("results/report.html"), "-o", "--output"),
           db: Path = DbOpt) -> None:
    """Write the self-contained HTML report."""
    path = lab_app.report(experiment, db, output)
    out.print(f"report: {path.resolve()}")


class Format(str, Enum):
    csv = "csv"
    json = "json"


@cli.command()
@guarded
def export(experiment: Optional[str] = typer.Argument(None, help="Name or id (default: newest)."),
           format: Format = typer.Option(Format.csv, "--format"),
           output: Optional[Path] = typer.Option(None, "-o", "--output",
                                                 help="File (default: stdout)."),
           db: Path = DbOpt) -> None:
    """Export every stored run of an experiment as CSV or JSON."""
    text = lab_app.export(experiment, db, format.value)
    if output:
        output.write_text(text)
    else:
        sys.stdout.write(text)


@cli.command()
@guarded
def compare(a: str = typer.Argument(..., help="Experiment (name or id) or trial id (prefix)."),
            b: str = typer.Argument(..., help="Experiment (name or id) or trial id (prefix)."),
            experiment: Optional[str] = typer.Option(None, "--experiment", "-e",
                                                     help="Where the trials are (default: "
                                                     "newest)."),
            db: Path = DbOpt) -> None:
    """Compare two experiments or two trials: ratio with a 95% CI, p-value, verdict."""
    lab_app.compare_cmd(a, b, db, experiment, out)


@cli.command()
@guarded
def recommend(experiment: Optional[str] = typer.Argument(None, help="Name or id (default: "
                                                         "newest)."),
              db: Path = DbOpt) -> None:
    """What each varied knob did, ranked by gain, and the best combination."""
    lab_app.recommend_cmd(experiment, db, out)


@cli.command("export-config")
@guarded
def export_config(trial: str = typer.Argument(..., help="Trial id (prefix), see `show`."),
                  output: Path = typer.Option(..., "-o", "--output", help="Directory."),
                  experiment: Optional[str] = typer.Option(None, "--experiment", "-e"),
                  db: Path = DbOpt) -> None:
    """Write a measured variant's configuration files, cleaned of lab paths."""
    for path in lab_app.export_config_cmd(trial, db, experiment, output):
        out.print(str(path))


@cli.command()
@guarded
def breakdown(stack: str = typer.Argument(..., help="Stack, see `stacklab stacks`."),
              workload: str = typer.Argument(..., help="Workload, e.g. app-show."),
              requests: int = typer.Option(200, "--requests", "-n",
                                           help="Engine requests per URL and keep-alive mode."),
              knob: list[str] = typer.Option([], "--knob", help="component.name=value "
                                             "(repeatable)."),
              db: Path = DbOpt) -> None:
    """Where one request's time goes (S1's overview method): database, PHP, web server."""
    lab_app.breakdown_cmd(stack, workload, requests, knob, db, out)


@cli.command()
@guarded
def dbbench(spec: Path = typer.Argument(..., help="Experiment file (TOML) with mariadb stacks."),
            loops: int = typer.Option(5000, "--loops", help="Loops of the application's "
                                      "queries per variant."),
            db: Path = DbOpt) -> None:
    """The model application's SQL looped on MariaDB alone, per mariadb.* setting (S1)."""
    lab_app.dbbench_cmd(spec, loops, db, out)


@cli.command()
@guarded
def workloads() -> None:
    """List the workloads: what each deploys and which stacks can serve it."""
    lab_app.list_workloads(out)


@cli.command()
@guarded
def stacks() -> None:
    """List stacks, components with their versions, and every knob."""
    lab_app.list_stacks(out)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
