"""MariaDB's own check of a user's option file (mariadb.cnf_extra): mariadbd reads it
with --help --verbose, which parses every option as a start does and refuses an unknown
variable or a bad value (10.11 has no --validate-config)."""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import StackError, control_character
from ..userconf import UserFile, first_error

BINARY = "/usr/sbin/mariadbd"
INCLUDED = "cnf_extra.cnf"    # the user's file, copied into the run directory
# An option file's options need a group: the user's lines go to the server's, unless
# they open another themselves.
GROUP = "[mariadbd]\n"
# mariadbd's log prefix before its message: "2026-11-28  3:29:50 0 [ERROR] "
STAMP = re.compile(r"^.*?\[ERROR\]\s*(Buffered error:\s*)?")
ERRORS = re.compile(r"\[ERROR\]|^Error:")       # not its [Warning]s


def check_file(user: Path, scratch: Path) -> str | None:
    """mariadbd reading the user's lines in its group alone; its first error, or None."""
    conf = scratch / "my.cnf"
    conf.write_text(GROUP + user.read_text())
    error = first_error([BINARY, f"--defaults-file={conf}", "--help", "--verbose"],
                        errors=ERRORS)
    return None if error is None else STAMP.sub("", error).replace(str(conf), str(user))


def included(user: UserFile) -> str:
    """The copy the run's my.cnf includes: the server's group, then the user's lines."""
    return GROUP + user.header("#") + user.text


def include_line(run_dir: Path) -> str:
    """`!include PATH` for the copy: MariaDB takes the rest of the line as the path and
    no quotes (a quoted path is not found), so what a line cannot hold is refused."""
    path = str(run_dir / INCLUDED)
    if control_character(path, allowed="") or path != path.strip():
        raise StackError(f"{path!r} cannot follow !include in an option file")
    return f"!include {path}\n"
