"""Keeping a run's logs with its results: where (a directory never overwritten), and how
much (long access logs: their last lines), without ever costing the run its row."""

from __future__ import annotations

import errno
import shutil
from datetime import datetime
from pathlib import Path
from typing import Callable

from ..host import lab

KEPT_LOG_LINES = 200
# Logs are kept only while this much stays free beside the database for the run's row
# and its journal entry: the logs can go, the measurement must not.
RESULTS_RESERVE_MIB = 4


def kept_dir(parent: Path, name: str, clock: Callable[[], str]) -> Path:
    """Where a run's logs are kept. A deleted and re-created database reuses experiment
    ids: an existing directory is never overwritten, the name gets the time."""
    stamp = datetime.fromisoformat(clock()).strftime("%Y%m%dT%H%M%S%f")
    kept, n = parent / name, 1
    while kept.exists():
        kept = parent / (f"{name}-{stamp}" + (f"-{n}" if n > 1 else ""))
        n += 1
    return kept



def keep_logs(run_dir: Path, kept_dir: Path) -> str | None:
    """Keep each server's logs with the run (long access logs: their last lines only).
    Logs that cannot be kept (the results disk full, or the room the run's row needs
    taken) are a note, not an error: the run was measured and is stored without them."""
    try:
        for log in list(run_dir.rglob("*.log")) + list(run_dir.rglob("*.out")):
            target = kept_dir / log.relative_to(run_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            if log.stat().st_size > 1 << 20:
                lines = log.read_text(errors="replace").splitlines()
                target.write_text(f"# last {KEPT_LOG_LINES} of {len(lines)} lines\n" +
                                  "\n".join(lines[-KEPT_LOG_LINES:]) + "\n")
            else:
                shutil.copyfile(log, target)
        if kept_dir.exists() and (free := lab.free_mib(kept_dir)) < RESULTS_RESERVE_MIB:
            raise OSError(errno.ENOSPC, f"{free:.1f} MiB would be left, under the "
                          f"{RESULTS_RESERVE_MIB} MiB kept for the run's row")
    except OSError as e:
        shutil.rmtree(kept_dir, ignore_errors=True)   # its room is the run's row's
        return (f"logs not kept: {errno.errorcode.get(e.errno, e.errno)} ({e.strerror}) "
                f"in {kept_dir.parent}")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return None
