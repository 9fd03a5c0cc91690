"""A config of one's own: a file of the user's directives (nginx.include, apache.include,
php.ini_extra, mariadb.cnf_extra), included verbatim after stacklab's own settings.

The file is named in the experiment file relative to its directory (spec.py makes it
absolute: Knob.path). Its knob's `validate` reads it and hands it to the server's own
config test before any server starts, so a typo is one line naming the knob, the file and
what the server said, not a failed start halfway through an experiment. Each run copies
the file into its run directory (what ran is what is stored, in the run's configs and in
export-config) with its sha256 beside it, and a component records that hash with its
versions, so that a resume refuses to pool runs of an edited file with the stored ones.
A server whose config includes the file and whose own test can check the run's whole
config (nginx, Apache) is an IncludingServer: it runs that test before every start.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from abc import abstractmethod
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

from ..errors import StackError, control_character, printable
from ..host.regular import read_regular
from ..knobs import Knob
from .base import Component, RenderContext, RunningComponent
from .includewrites import Scanner

INCLUDE = "include"           # an IncludingServer's knob naming the user's file
MAX_BYTES = 1 << 20          # a file of directives, not a data set
TEST_TIMEOUT_S = 30

# (the user's file, a scratch directory) -> the server's first error about it, or None
Tester = Callable[[Path, Path], "str | None"]


@dataclass(frozen=True)
class UserFile:
    """The user's file as read once: which knob named it, where it is, what it says."""

    knob: str         # "nginx.include"
    path: Path        # absolute, as spec.py resolved it
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def header(self, comment: str) -> str:
        """The line that names it in the config that includes it (one line, whatever
        the path holds)."""
        return (f"{comment} {self.knob}: {printable(str(self.path))} (sha256 {self.sha256}), "
                "the user's lines, verbatim\n")


def include_knob(component: str, name: str, meaning: str, test: Tester,
                 writes: Scanner) -> Knob:
    """A knob naming a file of the user's directives: default "" (none); refused at
    spec time unless it is a readable text file that writes nothing outside the run
    directory (`writes`, includewrites.py: read before any config test runs it) and
    the server's own test accepts."""
    key = f"{component}.{name}"
    return Knob(component, name, str, "", meaning, path=True,
                validate=partial(_problem, key, test, writes))


def read(knob: str, value: str) -> UserFile:
    """The file `value` names, or a StackError naming the knob and the file."""
    path = Path(os.path.abspath(value))
    try:
        return UserFile(knob, path, _text(path))
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise StackError(f"{knob}: {path}: {why}") from None


def versions(knob: str, value: str) -> dict[str, str]:
    """What a run records beside the component's version: the file's hash (none: {})."""
    if not value:
        return {}
    user = read(knob, value)
    return {f"{knob} {user.path}": f"sha256:{user.sha256}"}


def first_error(argv: list[str], lines: int = 1, env: dict[str, str] | None = None,
                errors: re.Pattern | None = None) -> str | None:
    """Run a server's config test: None when it passes (exit 0), else the first `lines`
    lines it printed (Apache says where on one line and what on the next) of those that
    match `errors` (MariaDB warns before it errs)."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=TEST_TIMEOUT_S,
                             env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        return f"cannot run {argv[0]}: {e}"
    if out.returncode == 0:
        return None
    said = [line.strip() for line in (out.stderr + out.stdout).splitlines()
            if line.strip() and (errors is None or errors.search(line))]
    return " ".join(said[:lines]) or f"{argv[0]} exited with {out.returncode}"


def _write_rendered(run_dir: Path, files: dict[str, str]) -> None:
    """The run's configs written where Component.start writes them, for the server's
    test of the whole config before it starts (start writes the same texts again)."""
    for rel, text in files.items():
        (run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / rel).write_text(text)


def rendered_test(user: UserFile, copy: Path, argv: list[str], lines: int = 1,
                  env: dict[str, str] | None = None) -> None:
    """The run's own config tested before the server starts (what the user's lines meet
    there: a directive nginx refuses as a duplicate), its copy's path in the server's
    message named as the user's file; a StackError naming the knob and the file."""
    if (error := first_error(argv, lines, env)) is not None:
        raise StackError(f"{user.knob}: {user.path}: the run's config test "
                         f"({' '.join(argv[:2])}) refuses it: "
                         f"{error.replace(str(copy), str(user.path))}")


class IncludingServer(Component):
    """A server whose config includes a file of the user's directives named by its knob
    `include` (nginx.include, apache.include): its versions carry the file's hash, and
    before it starts its own config test runs on the run's rendered config, so that what
    the user's lines meet there (a directive nginx refuses as a duplicate) is one line
    naming the knob and the file, not a dead start."""

    def included(self, knobs: dict[str, Any]) -> UserFile | None:
        """The user's file its knob names, read (None: no file)."""
        value = knobs.get(INCLUDE, "")
        return read(self.knob(INCLUDE).key, value) if value else None

    @abstractmethod
    def test_run(self, user: UserFile, ctx: RenderContext, knobs: dict[str, Any]) -> None:
        """The server's own test of the run's rendered config in ctx.run_dir, with the
        user's file (rendered_test: a StackError naming the knob and the file)."""

    def versions(self, knobs: dict[str, Any]) -> dict[str, str]:
        """The server's own, and the hash of the user's file, if any."""
        return {**super().versions(knobs),
                **versions(self.knob(INCLUDE).key, knobs.get(INCLUDE, ""))}

    def versions_depend_on(self, knobs: dict[str, Any]) -> tuple:
        return (knobs[INCLUDE],) if knobs.get(INCLUDE) else ()

    def start(self, ctx: RenderContext, knobs: dict[str, Any], ready_timeout_s: float = 15.0,
              run_as: str | None = None) -> RunningComponent:
        """With the user's file, the run's config written and tested first (Component.start
        writes the same texts again)."""
        if user := self.included(knobs):
            ctx.run_dir.mkdir(parents=True, exist_ok=True)
            _write_rendered(ctx.run_dir, self.render(ctx, knobs))
            self.test_run(user, ctx, knobs)
        return super().start(ctx, knobs, ready_timeout_s, run_as)


def _problem(knob: str, test: Tester, writes: Scanner, value: str) -> str | None:
    """Why `value` cannot be used (Knob.validate), or None."""
    if not value:
        return None
    try:
        user = read(knob, value)
    except StackError as e:
        return str(e).removeprefix(f"{knob}: ")
    if found := writes(user.text):
        line, directive, path, why = found
        return (f"line {line}: {directive} {path}: {why} (an include may write only "
                "inside the run directory: a relative path, or off, /dev/null, stderr, "
                "syslog)")
    with tempfile.TemporaryDirectory(prefix="stacklab-conftest-") as scratch:
        try:
            error = test(user.path, Path(scratch))
        except StackError as e:        # a path its config language cannot quote
            error = str(e)
    return f"the server's config test refuses it: {error}" if error else None


def _text(path: Path) -> str:
    """A regular text file's content (host.regular: a FIFO would block, /dev/zero never
    end)."""
    data = read_regular(path, MAX_BYTES, "a file of directives")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not a UTF-8 text file") from None
    # a vertical tab or a form feed is whitespace to a reader of the file, not to nginx:
    # what the servers read and what includewrites reads must be the same words
    if (c := control_character(text, "\t\n\r")) is not None:
        line = text[:text.index(c)].count("\n") + 1
        raise ValueError(f"holds the control character {c!r} on line {line}: a file of "
                         "directives is text")
    return text
