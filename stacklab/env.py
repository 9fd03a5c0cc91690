"""The world a command runs in, chosen once (httpie's Environment): where its output
goes, what time it is, where results and run directories live.

cli.py builds the real one for each invocation; a test builds its own (a recording
console, a fixed clock, a database in tmp_path) and runs the whole CLI in-process.
Nothing below cli.py reads sys.stdout, the wall clock or the default paths itself."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping

from rich.console import Console

from .host import lab

DB_VARIABLE = "STACKLAB_DB"   # the results database when --db is not given
DATA_VARIABLE = "XDG_DATA_HOME"   # else <it>/stacklab/stacklab.db (XDG base directories)
DB_IN_DATA = Path("stacklab/stacklab.db")
# How --help names the default: one database per user, wherever the command is run.
DEFAULT_DB_SPELLED = f"${DATA_VARIABLE}/{DB_IN_DATA} (~/.local/share/{DB_IN_DATA})"
# Piped output (make demo | tee, CI logs) gets room for the whole table.
PIPED_WIDTH = 140     # wide enough for show's table (ids, ranges, ⚑ marks) uncut


def user_db(environ: Mapping[str, str], home: Path) -> Path:
    """The results database of this user when --db is not given: $STACKLAB_DB, else
    $XDG_DATA_HOME/stacklab/stacklab.db, else ~/.local/share/stacklab/stacklab.db; never
    relative to the current directory, so every command finds the same results wherever
    it runs. (The XDG spec ignores a relative $XDG_DATA_HOME, and so does this.)"""
    if environ.get(DB_VARIABLE):
        return Path(environ[DB_VARIABLE])
    data = environ.get(DATA_VARIABLE, "")
    return (Path(data) if os.path.isabs(data) else home / ".local" / "share") / DB_IN_DATA


def utc_now() -> str:
    """The time stamp stored records carry: ISO 8601, UTC, milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class Environment:
    stdout: Console
    stderr: Console
    clock: Callable[[], str]     # time stamps of what commands store (utc_now's format)
    db: Path                     # the results database when --db is not given
    lab_root: Path               # where run directories live while servers run

    @classmethod
    def default(cls) -> Environment:
        """The terminal, the wall clock, this user's database (user_db: the environment
        is read here, once, at the command line's edge), /tmp/stacklab-<uid>."""
        db = user_db(os.environ, Path.home())
        return cls(stdout=Console(width=None if sys.stdout.isatty() else PIPED_WIDTH),
                   stderr=Console(stderr=True), clock=utc_now, db=db,
                   lab_root=lab.default_root())

    def database(self, given: Path | None) -> Path:
        """The results database: --db when given, else this environment's."""
        return self.db if given is None else given
