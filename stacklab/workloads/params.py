"""Workload parameters: `name:value` on an experiment's workload axis.

    workload = ["static-page", "static-page:600", "portal-page:26k", "php-page:680k",
                "php-cpu:20000"]

A size is in bytes, with k = KiB and m = MiB (as file-100k is 100 KiB); a count is a
plain integer. The bare name keeps meaning exactly what it always did, so its trials keep
their ids. A value is written back in one spelling (26624 → 26k, 26K → 26k, and the value
the bare name already stands for → the bare name), so two spellings are never two trials.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

KIB, MIB = 1024, 1024 * 1024
_SIZE = re.compile(r"^([0-9]{1,12})([km]?)$", re.IGNORECASE)
_COUNT = re.compile(r"^[0-9]{1,12}$")


@dataclass(frozen=True)
class Param:
    """What the value after the colon means for one workload."""

    kind: str                                 # "size" (bytes) or "count"
    min: int
    max: int
    what: str                                 # e.g. "the page's size", for messages
    build: Callable[[int, int], list]         # (seed, value) -> files, like Workload.build
    example: str                              # a value worth showing, e.g. "600"
    default: int | None = None                # the value the bare name stands for (same bytes)

    @property
    def syntax(self) -> str:
        return "SIZE" if self.kind == "size" else "N"

    def parse(self, text: str) -> int:
        """The value of `text`, or ValueError saying what is expected."""
        if self.kind == "size":
            m = _SIZE.match(text.strip())
            if not m:
                raise ValueError(f"expected {self.what} in bytes such as 600, 26k or 1m "
                                 "(k = 1024)")
            value = int(m.group(1)) * {"": 1, "k": KIB, "m": MIB}[m.group(2).lower()]
        else:
            if not _COUNT.match(text.strip()):
                raise ValueError(f"expected {self.what} as a whole number such as "
                                 f"{self.example}")
            value = int(text)
        if not self.min <= value <= self.max:
            raise ValueError(f"{self.what} must be {self.spell(self.min)}..{self.spell(self.max)}"
                             f", not {self.spell(value)}")
        return value

    def spell(self, value: int) -> str:
        if self.kind == "size" and value and value % MIB == 0:
            return f"{value // MIB}m"
        if self.kind == "size" and value and value % KIB == 0:
            return f"{value // KIB}k"
        return str(value)

    def usage(self, name: str) -> str:
        """One line for `stacklab workloads`."""
        return (f"{name}:{self.syntax} sets {self.what} ({self.spell(self.min)}.."
                f"{self.spell(self.max)}{', k = KiB, m = MiB' if self.kind == 'size' else ''}"
                f"; e.g. {name}:{self.example})")


def split(name: str) -> tuple[str, str | None]:
    """'php-page:680k' -> ('php-page', '680k'); 'php-page' -> ('php-page', None)."""
    base, sep, value = name.partition(":")
    return base, (value if sep else None)
