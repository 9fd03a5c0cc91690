"""Before a run: a settled disk and, when asked, a quiet host.

A run that writes many files (PHP's file sessions: ~16,000 a run) leaves their writeback,
and the removal of its run directory, to whatever runs next: on the lab root on disk the
next run of the same trial measured −88% where a tmpfs root measured −30%. So each run
starts after the disk has settled — everything written back and no task waiting for I/O
for a short spell — and says how long that took. The settle could not see all of it: on
ext4 mounted with discard a trial's first run read 6,555 req/s and the next three
1,860-2,012 with no I/O stall in any window. Each run's directory is now a fresh
filesystem of its own (netlab/rundir.py: a tmpfs by default), so what a run writes never
reaches the lab root's disk; the settle stays for what still does (fs.type's loop
images, other work on the host).

A run disturbed by other work on the host (flags.DISTURBED) is measured again; with
`--wait-quiet` the runner first waits, for a bounded time, until the host's CPUs are idle
of others' work.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

from ..measure.monitor import cpu_mark, host_io_stall_us, others_cores

SETTLE_MAX_S = 30.0         # the longest a run waits for the disk
SETTLE_SPELL_S = 0.2        # a spell with no task waiting for I/O…
SETTLE_STALL_SHARE = 0.01   # …more than this share of it: settled
QUIET_MAX_S = 120.0         # the longest --wait-quiet waits before a run measured again
QUIET_SPELL_S = 1.0         # a spell over which the host's busy CPU is read


@dataclass(frozen=True)
class Settled:
    seconds: float            # how long the sync and the wait took
    settled: bool             # False: SETTLE_MAX_S passed with I/O still pending
    io_stall_share: float | None   # of the last spell (None: no PSI)

    def record(self) -> dict:
        return {"settle_s": round(self.seconds, 3), "settled": self.settled,
                "settle_io_stall_share": self.io_stall_share}


def settle(max_s: float = SETTLE_MAX_S, clock=time.monotonic, sleep=time.sleep,
           stall_us=host_io_stall_us, sync=os.sync) -> Settled:
    """Write everything back (sync), then wait until a SETTLE_SPELL_S spell in which no
    task waited for I/O more than SETTLE_STALL_SHARE of it (/proc/pressure/io), at most
    `max_s`. Without PSI the sync is all there is."""
    start = clock()
    sync()
    share = None
    while True:
        before = stall_us()
        if before is None:
            return Settled(clock() - start, True, None)
        sleep(SETTLE_SPELL_S)
        after = stall_us()
        share = (after - before) / (SETTLE_SPELL_S * 1e6) if after is not None else 0.0
        if share <= SETTLE_STALL_SHARE:
            return Settled(clock() - start, True, round(share, 4))
        if clock() - start >= max_s:
            return Settled(clock() - start, False, round(share, 4))


@dataclass(frozen=True)
class Quiet:
    seconds: float            # how long it waited
    quiet: bool               # False: gave up after QUIET_MAX_S
    busy_cores: float         # the host's busy CPU over the last spell, not stacklab's own


def busy_cores(spell_s: float = QUIET_SPELL_S, sleep=time.sleep) -> float:
    """The host's busy CPU over one spell, less this process's own: between runs no lab
    server runs, so this is the others' work."""
    mark = cpu_mark()
    sleep(spell_s)
    return others_cores(mark)


def wait_quiet(max_s: float = QUIET_MAX_S, clock=time.monotonic, reading=busy_cores,
               say: Callable[[str], None] = lambda line: None) -> Quiet:
    """Wait until the others' work on the host is under what flags host-busy (a spell of
    QUIET_SPELL_S), at most `max_s`. When the first spell is busy, `say` is told that the
    wait begins, and then how it ended: a wait of minutes is never silent."""
    # here, not at the top: the command line reads QUIET_MAX_S for its help, and the
    # flags bring numpy with them
    from ..analysis.flags import HOST_BUSY_CORE_SHARE
    start = clock()
    busy = reading()
    if busy <= HOST_BUSY_CORE_SHARE:
        return Quiet(clock() - start, True, round(busy, 3))
    say(f"waiting up to {max_s:.0f} s for the host to go quiet: {busy:.2f} cores of "
        f"other work (quiet: at most {HOST_BUSY_CORE_SHARE:.2f})")
    while True:
        if clock() - start >= max_s:
            q = Quiet(clock() - start, False, round(busy, 3))
            say(f"the host stayed busy: {q.busy_cores:.2f} cores of other work after "
                f"{q.seconds:.0f} s of waiting; measuring all the same")
            return q
        busy = reading()
        if busy <= HOST_BUSY_CORE_SHARE:
            q = Quiet(clock() - start, True, round(busy, 3))
            say(f"the host went quiet after {q.seconds:.0f} s of waiting")
            return q
