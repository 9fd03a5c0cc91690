"""Files of the user's that stacklab reads (experiment files, include files, replay logs,
the files of a `dir:` site) opened only as regular files; and the one way a file that
must survive a kill (a journal entry, a load's report) is written in place, synced.

A FIFO would block a read forever, /dev/zero never end, a socket or a device answer
anything; a symlink to one is the same thing. Each file is opened without blocking and
checked on the open descriptor (fstat), so what is read is what was checked, not a name
that changed in between. Every reader of the user's files goes through here, so the rule
is said once.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFCHR:
         "a character device", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket",
         stat.S_IFLNK: "a symlink"}


class NotRegular(ValueError):
    """The file is not one to read: its message says what it is instead."""


def kind(mode: int) -> str:
    """What a file of this st_mode is, in words ("a FIFO")."""
    return KINDS.get(stat.S_IFMT(mode), "not a file")


def open_regular(path: Path | str, follow: bool = True) -> BinaryIO:
    """The file opened for reading, if it is a regular file (through a symlink unless
    `follow` is False); NotRegular naming what it is, or OSError."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if not follow and os.path.islink(path):
            raise NotRegular("not a regular file (a symlink)") from None
        raise e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(f"not a regular file ({kind(mode)})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path | str, limit: int, what: str = "file") -> bytes:
    """A regular file's bytes, at most `limit` of them; NotRegular when it is not one
    or is larger ("larger than 1 MiB: not a <what>"), or OSError."""
    with open_regular(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise NotRegular(f"larger than {_size(limit)}: not {what}")
    return data


def write_in_place(path: Path | str, data: bytes) -> None:
    """`data` over the start of `path` (made if missing), the file cut to it and synced:
    room reserved there beforehand (zeros) holds it whatever the disk has left; what
    does not fit takes the disk's own space."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], written)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"
