"""The `stacklab` command: parse, call one command (stacklab/commands), map what it
returns or raises to an exit status, in one place."""

from __future__ import annotations

import os
import sqlite3
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import click
import typer
from rich.markup import escape
from typer.completion import completion_init, get_completion_script, install
from typer.core import TyperGroup

from .env import DB_VARIABLE, DEFAULT_DB_SPELLED, Environment
from .errors import ExitStatus, StacklabError, UsageError, printable
from .run.quiet import QUIET_MAX_S

# Each command imports what it runs when it runs (`from .commands import …` in its
# body): `stacklab --version`, `--help` and a light command do not pay for numpy, the
# stacks, the studies and the report machinery (bench/startup.py times them).


def error_line(e: BaseException) -> tuple[ExitStatus, str] | None:
    """What the boundary says about `e` (one line) and the status it exits with; None
    for anything else, which is a bug and keeps its traceback."""
    if isinstance(e, StacklabError):
        return e.exit_status, str(e)
    if isinstance(e, KeyboardInterrupt):
        return ExitStatus.INTERRUPTED, "interrupted"
    if isinstance(e, sqlite3.Error):
        return ExitStatus.ERROR, printable(f"results database: {e}")
    from .stacks import COMPONENTS
    for component in COMPONENTS.values():    # its client library's (dbbench's database)
        if (said := component.error_line(e)) is not None:
            return ExitStatus.ERROR, printable(said)
    if isinstance(e, OSError):
        return ExitStatus.ERROR, printable(f"{e.filename}: {e.strerror}" if e.filename
                                           else str(e))
    return None


class Boundary(TyperGroup):
    """The one error boundary, around every command: an error becomes one line on
    stderr and its ExitStatus (`--traceback` shows the rest); what a command returns
    is the exit status. The Environment is made here unless the caller gave one.
    Every command's help is shown as written (as_written)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for command in (self, *self.commands.values()):
            as_written(command)

    def invoke(self, ctx):
        env = ctx.obj = ctx.obj or Environment.default()
        try:
            status = super().invoke(ctx)
        except BrokenPipeError:             # `stacklab show | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(ExitStatus.OK) from None
        except (Exception, KeyboardInterrupt) as e:
            said = error_line(e)
            if said is None or ctx.params.get("traceback"):
                raise
            env.stderr.print(f"stacklab: error: {said[1]}", markup=False, highlight=False,
                             soft_wrap=True)
            raise typer.Exit(said[0]) from None
        if status:
            raise typer.Exit(status)


def as_written(command: click.Command) -> None:
    """The command's help texts (its own, its epilog, its parameters') escaped for Rich,
    which typer renders them with: a word in square brackets ("[external]", "[tune]",
    "[default: 5s]") is shown, not read as a markup tag and dropped."""
    for part in (command, *command.params):
        for field in ("help", "short_help", "epilog"):
            if isinstance(text := getattr(part, field, None), str):
                setattr(part, field, escape(text))


DB_HELP = (f"Results go to one database per user, whichever directory a command runs in: "
           f"--db, else ${DB_VARIABLE}, else {DEFAULT_DB_SPELLED}; created with its "
           "directory by the first `run`.")
cli = typer.Typer(cls=Boundary, add_completion=False, no_args_is_help=True,
                  pretty_exceptions_enable=False,
                  help="stacklab: a performance lab for web stacks.", epilog=DB_HELP)


def _db(ctx: typer.Context, param: typer.CallbackParam, path: Path | None) -> Path | None:
    """A command's --db, or the one written before the command (`stacklab --db PATH
    show`): either place, not two different paths."""
    before = ctx.parent.params.get("db") if ctx.parent else None
    if path is not None and before is not None and path != before:
        raise UsageError(f"--db given twice: {before} before the command, {path} after it; "
                         "give one")
    return before if path is None else path


DB_OPT_HELP = (f"Results database (SQLite); default: ${DB_VARIABLE}, else "
               f"{DEFAULT_DB_SPELLED}, one per user.")
DbOpt = typer.Option(None, "--db", show_default=False, callback=_db, help=DB_OPT_HELP)
WaitQuietOpt = typer.Option(False, "--wait-quiet", help="Before measuring a run again "
                            "because other work disturbed it, wait up to "
                            f"{QUIET_MAX_S:.0f} s for the host to go quiet.")
ExperimentArg = typer.Argument(None, help="Name or id (default: newest).")
JsonOpt = typer.Option(False, "--json", help="One JSON document (its schema: "
                       "stacklab/report/schemas/).")
# Shell completion: the shell runs `_STACKLAB_COMPLETE=complete_<shell> stacklab` for the
# candidates; completion_init registers typer's zsh and fish answers (click has bash's).
PROG, COMPLETE_VAR = "stacklab", "_STACKLAB_COMPLETE"
completion_init()


def _version(asked: bool) -> None:
    if asked:
        from . import __version__
        typer.echo(f"stacklab {__version__}")
        raise typer.Exit(ExitStatus.OK)


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def _completion(ctx: typer.Context, param: typer.CallbackParam, shell: Shell | None) -> None:
    """--show-completion SHELL prints the script, --install-completion SHELL adds it to
    that shell's startup files: typer's own code, but the shell is the one named (typer's
    built-in options detect the running shell and ignore a name given after them)."""
    if shell is None or ctx.resilient_parsing:
        return
    if param.name == "show_completion":
        typer.echo(get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR,
                                         shell=shell.value))
    else:
        _, path = install(shell=shell.value, prog_name=PROG, complete_var=COMPLETE_VAR)
        typer.echo(f"{shell.value} completion installed in {path}; it works in a new shell")
    raise typer.Exit(ExitStatus.OK)


@cli.callback()
def _options(ctx: typer.Context,
             traceback: bool = typer.Option(False, "--traceback",
                                            help="Show the full traceback on errors."),
             db: Optional[Path] = typer.Option(None, "--db", show_default=False,
                                               help=DB_OPT_HELP + " Before or after the "
                                               "command."),
             version: bool = typer.Option(False, "--version", callback=_version,
                                          is_eager=True, help="Print the version."),
             show_completion: Optional[Shell] = typer.Option(
                 None, "--show-completion", callback=_completion, is_eager=True,
                 expose_value=False, metavar="SHELL", help="Print the completion script "
                 "for bash, zsh or fish."),
             install_completion: Optional[Shell] = typer.Option(
                 None, "--install-completion", callback=_completion, is_eager=True,
                 expose_value=False, metavar="SHELL", help="Install completion for bash, "
                 "zsh or fish (in that shell's startup files).")):
    """stacklab: a performance lab for web stacks."""
    command = ctx.command.commands.get(ctx.invoked_subcommand or "")
    if db is not None and command and not any(p.name == "db" for p in command.params):
        raise UsageError(f"--db {db}: `stacklab {ctx.invoked_subcommand}` reads no results "
                         "database")


@cli.command()
def doctor(ctx: typer.Context, json: bool = JsonOpt) -> ExitStatus:
    """Check every component: found or not, version, the apt package to install."""
    from .commands import listing
    return listing.doctor(ctx.obj, json)


@cli.command()
def run(ctx: typer.Context,
        spec: Path = typer.Argument(..., help="Experiment file (TOML)."),
        db: Optional[Path] = DbOpt,
        resume: bool = typer.Option(False, "--resume", help="Complete the newest experiment "
                                    "of this name without redoing finished runs."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, start nothing."),
        wait_quiet: bool = WaitQuietOpt,
        allow_remote: bool = typer.Option(
            False, "--allow-remote", help="Let an [external] server's url be a host that is "
            "not loopback (its host is not checked; the report says so), and "
            "--agents-listen an address that is not loopback (an unauthenticated Dask "
            "scheduler: docs/load.md, \"Load from several hosts\"). Only here, never in an "
            "experiment file."),
        agents_listen: Optional[str] = typer.Option(
            None, "--agents-listen", metavar="HOST:PORT", help="load.agents on other "
            "hosts: listen here for their Dask workers (`dask worker tcp://HOST:PORT "
            "--name NAME --nthreads 1 --no-nanny` on each) instead of starting local "
            "agents; for an [external] server. An IPv6 address in brackets "
            "([2001:db8::10]:8786); not loopback: with --allow-remote. Only here, never in "
            "an experiment file."),
        agents_wait: float = typer.Option(
            120.0, "--agents-wait", min=1, max=3600, help="Seconds to wait for "
            "--agents-listen's workers to join.")) -> ExitStatus:
    """Run an experiment: plan, start real stacks, verify, load, store each run."""
    from .commands import run as running
    return running.run(ctx.obj, spec, db, resume, dry_run, wait_quiet, allow_remote,
                       agents_listen, agents_wait)


@cli.command()
def capacity(ctx: typer.Context,
             spec: Path = typer.Argument(..., help="Experiment file (TOML)."),
             slo: Optional[str] = typer.Option(
                 None, "--slo", help='Latency goal, e.g. "p99<50ms" (p50..p99.99; us, ms, '
                 "s), timed from each request's intended send time."),
             max_error_rate: Optional[str] = typer.Option(
                 None, "--max-error-rate", help='Failed requests and 4xx/5xx answers a '
                 'passing step may have, e.g. "0.1%" [default: 0%].'),
             step: Optional[str] = typer.Option(
                 None, "--step", help='Length of a search step, e.g. "5s" [default: 5s]; '
                 "the confirmation lasts the experiment's duration."),
             connections: Optional[int] = typer.Option(
                 None, "--connections", help="Open-loop connections [default: the spec's "
                 "largest concurrency]."),
             repetitions: Optional[int] = typer.Option(
                 None, "--repetitions", help="Searches per trial, each on a fresh stack "
                 "[default: 3]."),
             memory: Optional[str] = typer.Option(
                 None, "--memory", help='RAM budget, e.g. "512M": the worker limits that '
                 "fit it, measured, then verified under load inside it."),
             output: Optional[Path] = typer.Option(
                 None, "-o", "--output", help="Also write the HTML report of the searches "
                 "(its directory must exist)."),
             db: Optional[Path] = DbOpt,
             resume: bool = typer.Option(False, "--resume", help="Complete the newest "
                                         "capacity experiment of this spec."),
             dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, start "
                                          "nothing."),
             wait_quiet: bool = WaitQuietOpt,
             allow_remote: bool = typer.Option(
                 False, "--allow-remote", help="As for run: an [external] server that is "
                 "not on loopback.")) -> ExitStatus:
    """The highest rate each stack sustains under a latency goal, with its interval."""
    from .commands import capacity as searching
    return searching.capacity(ctx.obj, spec, db, slo, max_error_rate, step, connections,
                              repetitions, memory, resume, dry_run, wait_quiet,
                              allow_remote, output)


@cli.command()
def tune(ctx: typer.Context,
         spec: Path = typer.Argument(..., help="Experiment file (TOML) with a [tune] section."),
         db: Optional[Path] = DbOpt,
         resume: bool = typer.Option(False, "--resume", help="Continue the stored search of "
                                     "this name (a trial or the final comparison cut short "
                                     "is completed, its stored runs kept)."),
         dry_run: bool = typer.Option(False, "--dry-run", help="Print the search space, "
                                      "start nothing."),
         wait_quiet: bool = WaitQuietOpt,
         allow_remote: bool = typer.Option(False, "--allow-remote", help="As for run.")
         ) -> ExitStatus:
    """Search the stack's settings jointly (Optuna), then the best against the defaults."""
    from .commands import tune as tuning
    return tuning.tune(ctx.obj, spec, db, resume, dry_run, wait_quiet, allow_remote)


@cli.command("list")
def list_(ctx: typer.Context, db: Optional[Path] = DbOpt,
          json: bool = typer.Option(False, "--json", help="One JSON document.")
          ) -> ExitStatus:
    """The experiments in the results database: status, runs, when."""
    from .commands import catalog
    return catalog.list_experiments(ctx.obj, db, json)


@cli.command()
def show(ctx: typer.Context, experiment: Optional[str] = ExperimentArg,
         db: Optional[Path] = DbOpt, json: bool = JsonOpt,
         brief: bool = typer.Option(False, "--brief", help="One line per question: each "
                                    "variant against its default, the leading trial "
                                    "against the next; by how much, and the verdict.")
         ) -> ExitStatus:
    """Text table of an experiment's results."""
    from .commands import results
    return results.show(ctx.obj, experiment, db, json, brief)


@cli.command()
def report(ctx: typer.Context, experiment: Optional[str] = ExperimentArg,
           output: Path = typer.Option(Path("report.html"), "-o", "--output",
                                       help="The HTML file; its directory must exist."),
           db: Optional[Path] = DbOpt,
           baseline: Optional[str] = typer.Option(
               None, "--baseline", help="Also against this experiment (name or id): each "
               "trial against the baseline's trial of the same definition, req/s and p99."),
           baseline_db: Optional[Path] = typer.Option(
               None, "--baseline-db", help="The baseline's results database (default: "
               "--db's).")) -> ExitStatus:
    """Write the self-contained HTML report."""
    from .commands import results
    return results.report(ctx.obj, experiment, db, output, baseline, baseline_db)


class Format(str, Enum):
    csv = "csv"
    json = "json"
    openmetrics = "openmetrics"


@cli.command()
def export(ctx: typer.Context, experiment: Optional[str] = ExperimentArg,
           format: Format = typer.Option(Format.csv, "--format"),
           output: Optional[Path] = typer.Option(None, "-o", "--output",
                                                 help="File (default: stdout)."),
           db: Optional[Path] = DbOpt) -> ExitStatus:
    """Export every stored run of an experiment as CSV or JSON, or its trials' figures
    as OpenMetrics (Prometheus' text format)."""
    from .commands import results
    return results.export(ctx.obj, experiment, db, format.value, output)


@cli.command()
def compare(ctx: typer.Context,
            a: str = typer.Argument(..., help="Experiment (name: its newest run; or id) or "
                                    "trial id (prefix)."),
            b: str = typer.Argument(..., help="Experiment (name or id) or trial id (prefix). "
                                    "The same name as A: A is its run before the newest."),
            experiment: Optional[str] = typer.Option(None, "--experiment", "-e",
                                                     help="Where the trials are (default: "
                                                     "the newest experiment holding both)."),
            db: Optional[Path] = DbOpt,
            db_b: Optional[Path] = typer.Option(None, "--db-b", help="B's results database "
                                                "(default: --db's); A and B are experiments."),
            fail_if: list[str] = typer.Option([], "--fail-if", help="CI gate, e.g. "
                                              "\"rps<-5%\" or \"p99>+10%\" (repeatable; "
                                              "metrics rps, p50, p99, mbps), judged on B/A's "
                                              "95% CI: pass (exit 0) when all of it is on "
                                              "the good side, FAIL (exit 3) when all of it "
                                              "is beyond, else inconclusive (exit 4, unless "
                                              "one failed); no pair of trials to judge: "
                                              "error (exit 1), never a pass."),
            strict: bool = typer.Option(False, "--strict", help="An inconclusive --fail-if "
                                        "counts as failed (exit 3), each said with why."),
            json: bool = JsonOpt,
            brief: bool = typer.Option(False, "--brief", help="One line per metric of each "
                                       "pair of trials whose verdict is not \"same\"."),
            margin: Optional[str] = typer.Option(None, "--margin", help="\"same\" only "
                                                 "when B/A's 95% CI lies within this of 1, "
                                                 "e.g. \"10%\" (default: the experiments' "
                                                 "own, 5% unless they set another).")
            ) -> ExitStatus:
    """Compare two experiments or two trials: ratio with a 95% CI, p-value, verdict.
    `compare NAME NAME`: the newest run of NAME against the one before it."""
    from .commands import results
    return results.compare(ctx.obj, a, b, db, experiment, fail_if, strict, db_b=db_b,
                           as_json=json, brief=brief, margin=margin)


@cli.command()
def recommend(ctx: typer.Context, experiment: Optional[str] = ExperimentArg,
              db: Optional[Path] = DbOpt, json: bool = JsonOpt) -> ExitStatus:
    """What each varied knob did, ranked by gain, and the best combination."""
    from .commands import results
    return results.recommend(ctx.obj, experiment, db, json)


@cli.command()
def combine(ctx: typer.Context, experiment: Optional[str] = ExperimentArg,
            repetitions: int = typer.Option(5, "--repetitions", "-r", help="Runs of each "
                                            "trial of the combination experiment."),
            dry_run: bool = typer.Option(False, "--dry-run", help="Print the winners and "
                                         "the plan, start nothing."),
            db: Optional[Path] = DbOpt) -> ExitStatus:
    """S1's last step: set the knob values that won alone (significantly, on req/s)
    together, measure every subset against the defaults side by side, and say whether
    the gains add up."""
    from .commands import combine as combining
    return combining.combine(ctx.obj, experiment, db, repetitions, dry_run)


@cli.command("export-config")
def export_config(ctx: typer.Context,
                  trial: str = typer.Argument(..., help="Trial id (prefix), see `show`."),
                  output: Path = typer.Option(..., "-o", "--output", help="Directory."),
                  experiment: Optional[str] = typer.Option(None, "--experiment", "-e"),
                  unsupported: bool = typer.Option(
                      False, "--unsupported", help="Write it even with settings no "
                      "verdict supports, each marked so in its README.txt."),
                  db: Optional[Path] = DbOpt) -> ExitStatus:
    """Write a measured variant's configuration files, cleaned of lab paths: only
    settings the measurements support."""
    from .commands import results
    return results.export_config(ctx.obj, trial, db, experiment, output, unsupported)


@cli.command()
def breakdown(ctx: typer.Context,
              stack: Optional[str] = typer.Argument(None, help="Stack, see `stacklab "
                                                    "stacks`."),
              workload: Optional[str] = typer.Argument(None, help="Workload, e.g. app-show."),
              requests: int = typer.Option(200, "--requests", "-n",
                                           help="Engine requests per URL and keep-alive mode."),
              knob: list[str] = typer.Option([], "--knob", help="component.name=value "
                                             "(repeatable)."),
              network: str = typer.Option("loopback", "--network", help="loopback, or "
                                          "veth: measured again across a veth link between "
                                          "two namespaces, the difference is the network's "
                                          "share (needs root)."),
              link: Optional[str] = typer.Option(None, "--link", help="The veth link's rate: "
                                                 "unlimited (default), 1gbit, 100mbit, …"),
              repetitions: int = typer.Option(3, "--repetitions", "-r", help="Fresh stacks "
                                              "measured, each stored: medians with an "
                                              "interval. 3, the fewest that show the spread "
                                              "between stacks (a range of 3, no 95% CI; 6+ "
                                              "for that) at 3× one measurement's time."),
              list_: bool = typer.Option(False, "--list", help="List the stored breakdowns."),
              show: Optional[str] = typer.Option(None, "--show", help="Show stored breakdown "
                                                 "ID again, without measuring."),
              json: bool = typer.Option(False, "--json", help="With --list/--show: one JSON "
                                        "document."),
              db: Optional[Path] = DbOpt) -> ExitStatus:
    """Where one request's time goes (S1's overview method): database, PHP, web server,
    and with --network veth the network. --list / --show ID: stored ones."""
    from .commands import measure
    return measure.breakdown(ctx.obj, stack, workload, requests, knob, db, network, link,
                             repetitions, list_, show, json)


@cli.command()
def dbbench(ctx: typer.Context,
            spec: Optional[Path] = typer.Argument(None, help="Experiment file (TOML) with "
                                                  "stacks that run a MySQL database."),
            loops: int = typer.Option(5000, "--loops", help="Loops of the application's "
                                      "queries per variant."),
            repetitions: int = typer.Option(3, "--repetitions", "-r", help="Times each "
                                            "variant is measured (round by round, each on a "
                                            "fresh database, each stored): medians, "
                                            "intervals, ratios to the defaults with a CI."),
            list_: bool = typer.Option(False, "--list", help="List the stored dbbenches."),
            show: Optional[str] = typer.Option(None, "--show", help="Show an EXPERIMENT's "
                                               "latest stored dbbench (or the one holding "
                                               "record ID) again, without measuring."),
            json: bool = typer.Option(False, "--json", help="With --list/--show: one JSON "
                                      "document."),
            db: Optional[Path] = DbOpt) -> ExitStatus:
    """The model application's SQL looped on its MySQL database alone, per setting (S1).
    --list / --show EXPERIMENT: stored ones."""
    from .commands import measure
    return measure.dbbench(ctx.obj, spec, loops, db, repetitions, list_, show, json)


@cli.command()
def study(ctx: typer.Context,
          name: str = typer.Argument(..., help="S1, S2, S3, S4 or S5 (the digest: "
                                     "stacklab/studies/SEEDS.md), or all: the five in "
                                     "one go, with one report over them."),
          quick: bool = typer.Option(False, "--quick", help="Fewer levels, repetitions "
                                     "and shorter runs; still a verdict per finding."),
          output: Optional[Path] = typer.Option(None, "-o", "--output", help="The study "
                                                "report (HTML) [default: study-sN.html or "
                                                "study-all.html "
                                                "in the current directory]."),
          dry_run: bool = typer.Option(False, "--dry-run", help="Print the study's "
                                       "experiments, start nothing."),
          report_only: bool = typer.Option(False, "--report-only", help="Measure nothing: "
                                           "the report from what is stored."),
          db: Optional[Path] = DbOpt, wait_quiet: bool = WaitQuietOpt,
          json: bool = typer.Option(False, "--json", help="The study's JSON document alone "
                                    "on stdout (what measuring says goes to stderr); it is "
                                    "also written beside the report.")) -> ExitStatus:
    """Re-measure a study's findings (or all five's) and set each against the study's
    figure: then and now, with intervals and verdicts (resumes a study run that was
    interrupted)."""
    from .commands import study as studying
    return studying.study(ctx.obj, name, quick, db, output, dry_run, report_only,
                          wait_quiet, as_json=json)


@cli.command()
def workloads(ctx: typer.Context, json: bool = JsonOpt) -> ExitStatus:
    """List the workloads: what each deploys and which stacks can serve it."""
    from .commands import listing
    return listing.workloads(ctx.obj, json)


@cli.command()
def stacks(ctx: typer.Context,
           owner: Optional[str] = typer.Argument(None, help="Only this component's (or "
                                                 "group's) knobs, e.g. nginx."),
           json: bool = typer.Option(False, "--json", help="One JSON document.")
           ) -> ExitStatus:
    """List stacks, front layers, components with their versions, and every knob."""
    from .commands import listing
    return listing.stacks(ctx.obj, owner, json)


def main(argv: list[str] | None = None, env: Environment | None = None) -> int:
    """`stacklab ARGV…` in `env` (default: this terminal): the exit status. Tests call
    it in-process with an Environment of their own."""
    try:
        cli(args=argv, obj=env)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
