"""Interrupts held while a process is being started: Ctrl-C, SIGTERM and SIGHUP that
arrive inside `interrupts_held()` wait until the block ends, then interrupt as usual.

Apart from lab.py, which installs `interrupt` as the handler for a session
(lab.session_scope), because the engine's driver (drive.py) holds interrupts around its
Popen and is a lower layer than the lab directory: both import this module, and drive.py
imports nothing of lab.py.
"""

from __future__ import annotations

from contextlib import contextmanager

# Interrupts that arrived inside interrupts_held(), raised when it ends.
_held = {"depth": 0, "pending": False}


def interrupt(signum, frame):
    """The signal handler a session installs: a KeyboardInterrupt now, or when the
    outermost interrupts_held() block ends."""
    if _held["depth"]:
        _held["pending"] = True
        return
    raise KeyboardInterrupt


@contextmanager
def interrupts_held():
    """Ctrl-C, SIGTERM and SIGHUP wait until the block ends, then interrupt as usual: a
    process started inside is known to its caller (Popen has returned) before the
    interrupt lands, so it can be stopped. (Popen interrupted between fork and return
    leaves a child nobody knows.) Inside a session_scope only; elsewhere a no-op."""
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if not _held["depth"] and _held["pending"]:
            _held["pending"] = False
            raise KeyboardInterrupt
