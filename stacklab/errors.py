"""Typed setup errors. Each one becomes a single clear line at the CLI boundary.

Per-request failures are never errors: they are counted data in load reports.
"""

from __future__ import annotations


class StacklabError(Exception):
    """Base of every error the CLI turns into one line and an exit code."""

    exit_code = 1


class SpecError(StacklabError):
    """Bad input in an experiment file: names the file, the key path and the value."""

    exit_code = 2

    def __init__(self, file: str, key: str, value: object, problem: str):
        self.file, self.key, self.value, self.problem = file, key, value, problem
        super().__init__(f"{file}: {key} = {value!r}: {problem}")


class UsageError(StacklabError):
    """Bad command-line input: names the flag or argument and the value."""

    exit_code = 2


class NotFound(StacklabError):
    """What the command line names (an experiment, a trial) does not exist."""

    exit_code = 2


class StackError(StacklabError):
    """A component could not be rendered, started or made ready."""

    def __init__(self, message: str, log_tail: str = ""):
        self.log_tail = log_tail
        super().__init__(message)


class EngineError(StacklabError):
    """The load engine could not run or returned an unusable report."""


class StoreError(StacklabError):
    """The results database cannot be used as asked."""


class LabError(StacklabError):
    """The lab directory cannot hold a run as it should (too little free space)."""


class UnsafePathError(StacklabError):
    """A path from outside (the lab root from TMPDIR, a config name from a results
    database) that cannot be used safely: names the path and what is wrong with it."""

    exit_code = 2
