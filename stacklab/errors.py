"""Typed setup errors. Each one becomes a single clear line at the CLI boundary.

Per-request failures are never errors: they are counted data in load reports.
"""

from __future__ import annotations

import re
import unicodedata
from enum import IntEnum


class ExitStatus(IntEnum):
    """What the `stacklab` process exits with: each error class names one (httpie's
    ExitStatus), so a script can tell bad input from a failed command."""

    OK = 0
    ERROR = 1            # a command that could not do its work (a setup error)
    BAD_INPUT = 2        # the spec, a flag or a name given is wrong: fix the input
    GATE = 3             # measured fine, but a threshold of the CI gate failed (gate.py)
    INCONCLUSIVE = 4     # the CI gate could neither pass nor fail a threshold (gate.py)
    INTERRUPTED = 130    # Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, as a shell reports it)


def printable(text: str) -> str:
    """`text` with every character a terminal would act on (ESC, newline, NUL, bidi
    overrides…) written as a Python repr writes it: one line that shows, never does."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# A word (a run without whitespace: a URL, a path, a value) longer than this is cut where
# a message says it: a 200 KB URL would otherwise be printed and stored whole.
MAX_WORD_CHARS = 200
_LONG_WORD = re.compile(r"\S{%d,}" % (MAX_WORD_CHARS + 1))


def clip(text: str) -> str:
    """`text` with every word past MAX_WORD_CHARS cut to its start, saying how long it
    was: 'http://h/aaaa… (204,817 characters)' (a cut word is MAX_WORD_CHARS long, so
    clipping twice cuts nothing more)."""
    return _LONG_WORD.sub(
        lambda m: f"{m[0][:MAX_WORD_CHARS - 1]}… ({len(m[0]):,} characters)", text)


def control_character(text: str, allowed: str = "\t\n") -> str | None:
    """The first control character (C0, DEL, C1, a line or paragraph separator) in
    `text` besides `allowed`, or None: what a text field from outside may not hold."""
    return next((c for c in text if c not in allowed
                 and unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)


def plain_text(value: str) -> str:
    """A text field from outside (a spec's description), as a pydantic validator: tabs
    and newlines are text; an ESC or a NUL would act on a terminal or end up in a report."""
    if (c := control_character(value)) is not None:
        raise ValueError(f"contains the control character {c!r}")
    return value


class StacklabError(Exception):
    """Base of every error the CLI turns into one line and an exit status. Its text is
    always one printable line, whatever the values it names contain.

    A subclass names its status as `exit_status`; `exit_code` is the same number as an
    int (a subclass that still sets only `exit_code` gets the matching status)."""

    exit_status = ExitStatus.ERROR
    exit_code = int(ExitStatus.ERROR)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "exit_code" in vars(cls) and "exit_status" not in vars(cls):
            cls.exit_status = ExitStatus(cls.exit_code)
        cls.exit_code = int(cls.exit_status)

    def __str__(self) -> str:
        return printable(clip(super().__str__()))


class SpecError(StacklabError):
    """Bad input in an experiment file: names the file, the key path and the value."""

    exit_status = ExitStatus.BAD_INPUT

    def __init__(self, file: str, key: str, value: object, problem: str):
        self.file, self.key, self.value, self.problem = file, key, value, problem
        super().__init__(f"{file}: {key} = {value!r}: {problem}")


class UsageError(StacklabError):
    """Bad command-line input: names the flag or argument and the value."""

    exit_status = ExitStatus.BAD_INPUT


class NotFound(StacklabError):
    """What the command line names (an experiment, a trial) does not exist."""

    exit_status = ExitStatus.BAD_INPUT


class StackError(StacklabError):
    """A component could not be rendered, started or made ready."""

    def __init__(self, message: str, log_tail: str = ""):
        self.log_tail = log_tail
        super().__init__(message)


class VerificationFailed(StacklabError):
    """A stack does not do what its knobs say (a verdict FAILed): it is not measured.
    Carries every verdict, and `reason`, the FAILed ones as "check: detail; …"."""

    def __init__(self, what: str, verdicts: tuple, reason: str):
        self.verdicts, self.reason = verdicts, reason
        super().__init__(f"{what} failed verification, not measured: {reason}")


class EngineError(StacklabError):
    """The load engine could not run or returned an unusable report."""


class StoreError(StacklabError):
    """The results database cannot be used as asked."""


class LabError(StacklabError):
    """The lab directory cannot hold a run as it should (too little free space)."""


class NothingJudged(StacklabError):
    """The CI gate found no pair of trials to judge (a spec edit changed every trial's
    definition, a baseline selector matches nothing): an error, never a silent pass."""


class Interrupted(StacklabError):
    """Ctrl-C, SIGTERM or SIGHUP ended the command; what was finished is kept."""

    exit_status = ExitStatus.INTERRUPTED


class UnsafePathError(StacklabError):
    """A path from outside (the lab root from TMPDIR, a config name from a results
    database) that cannot be used safely: names the path and what is wrong with it."""

    exit_status = ExitStatus.BAD_INPUT
