"""The journal's files, beside the database (`<db>.journal/`): one run's are named
`<experiment>-<trial>-r<repetition>` and told apart by their suffix.

- `.reserved`: room for the run's whole entry, made before its stack starts
  (Store.reserve); written in place the moment its load returns (Store.landed), then
  renamed `.json`;
- `.json`: the run whole, as the database stores it (`landed`, or `add_run` just before
  its insert); the two below then go;
- `.report`: room made with `.reserved`, into which the engine writes its report and
  syncs it before it exits (its --report-file);
- `.pending`: the run as known before its load (knobs, versions, configs, verdicts),
  written and synced just before the engine starts (Store.pending). Beside a finished
  report it is a run a resume completes and stores, whenever stacklab stopped after its
  engine exited. It has no room: written before the load, it needs the disk's space
  before the disk can have filled with the load's; on a disk already full it is not
  written, the engine is given no report file, and the load is kept from its return on.

A room is zeros until written, and zeros are no JSON document: a file that does not
parse was never written whole. Written in place, a room's blocks are the entry's own,
whatever the disk has left by then.
"""

from __future__ import annotations

import os
from pathlib import Path

ENTRY, ROOM, PENDING, REPORT = ".json", ".reserved", ".pending", ".report"
BESIDE = (ROOM, PENDING, REPORT)        # a run's files but its entry


def make_room(path: Path, size: int) -> None:
    """`size` zero bytes at `path`, written and synced: blocks the entry will own."""
    with open(path, "wb") as f:
        f.write(bytes(size))
        f.flush()
        os.fsync(f.fileno())


def remove(entry: Path) -> None:
    """Remove a journal file, and the journal directory once it is empty."""
    entry.unlink(missing_ok=True)
    try:
        entry.parent.rmdir()
    except OSError:
        pass                          # other entries wait there
