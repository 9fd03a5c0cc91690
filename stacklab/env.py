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
from typing import Callable

from rich.console import Console

from . import lab

DEFAULT_DB = Path("results/stacklab.db")
DB_VARIABLE = "STACKLAB_DB"   # the results database when --db is not given
# Piped output (make demo | tee, CI logs) gets room for the whole table.
PIPED_WIDTH = 140     # wide enough for show's table (ids, ranges, ⚑ marks) uncut


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
        """The terminal, the wall clock, $STACKLAB_DB or results/stacklab.db (read here,
        once, at the command line's edge), /tmp/stacklab-<uid>."""
        db = Path(os.environ[DB_VARIABLE]) if os.environ.get(DB_VARIABLE) else DEFAULT_DB
        return cls(stdout=Console(width=None if sys.stdout.isatty() else PIPED_WIDTH),
                   stderr=Console(stderr=True), clock=utc_now, db=db,
                   lab_root=lab.default_root())

    def database(self, given: Path | None) -> Path:
        """The results database: --db when given, else this environment's."""
        return self.db if given is None else given
