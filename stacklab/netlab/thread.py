"""Enter a lab network namespace with the calling thread only.

A network namespace belongs to a thread (setns(2) with CLONE_NEWNET moves the caller
alone), and what a thread creates there stays there: sockets it opens (readiness probes,
verification fetches, status pages) and processes it forks (the servers, which inherit
the forking thread's namespace). So stacklab runs a veth run's lifecycle in a thread that
has entered the server's namespace, and goes back when it ends. Threads started meanwhile
(the monitor, which only reads /proc; the counter reading) begin in it too.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def in_netns(name: str | None) -> Iterator[None]:
    """The calling thread inside namespace `name` (made by `ip netns add`, bound at
    /run/netns/NAME) until the block ends; None: stay where it is."""
    if name is None:
        yield
        return
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            with _signals_held():
                _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            with _signals_held():     # a Ctrl-C here must not leave the thread inside
                _setns(home)
    finally:
        os.close(home)


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block ends (then they arrive)."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
