"""What a dead session's lab layers leave behind, swept in one place.

A stacklab killed at any moment leaves records under its session directory of the
network namespaces, filesystems and cgroups it made (net.py, fs.py, cgroups.py each
write theirs before acting). The lab directory (host/lab.py) sits below netlab and knows
none of them, and netlab knows no lab directory: whoever opens a session hands it these
sweeps (lab.session_scope(root, sweeps=SWEEPS)), and every sweep of a dead session runs them
once its servers are stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import cgroups, fs, net

# Each removes what one kind of layer recorded under a dead session's directory (a
# lab.Sweep), run in this order: namespaces, filesystems, cgroups.
SWEEPS: tuple[Callable[[Path], object], ...] = (net.cleanup_stale, fs.cleanup_stale,
                                                 cgroups.cleanup_stale)
