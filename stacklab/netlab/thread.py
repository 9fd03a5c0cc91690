"""Enter a lab network namespace with the calling thread only.

A network namespace belongs to a thread (setns(2) with CLONE_NEWNET moves the caller
alone), and what a thread creates there stays there: sockets it opens (readiness probes,
verification fetches, status pages) and processes it forks (the servers, which inherit
the forking thread's namespace). So stacklab runs a veth run's lifecycle in a thread that
has entered the server's namespace, and goes back when it ends; the rest of stacklab
(the store, the monitor reading /proc) never leaves the host's.
"""

from __future__ import annotations

import ctypes
import os
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
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)
