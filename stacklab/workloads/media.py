"""Binary corpora, generated from the seed: a PNG picture, a photo set, large files.

Generated on demand (File.content is a function) so deploy can keep them in the docroot
between deployments with the same seed instead of making them again.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from dataclasses import dataclass

from .files import File

MB = 1 << 20
PICTURE_BYTES = 565 * 1000   # S5's picture.png


def png(seed: int, width: int, height: int) -> bytes:
    """An RGB PNG of noise over a gradient, written with zlib (no imaging library), so its
    size is close to width×height×3 (noise hardly compresses)."""
    rng = random.Random(seed)
    noise = rng.randbytes(width * height * 3)
    rows = []
    for y in range(height):
        row = bytearray(noise[y * width * 3:(y + 1) * width * 3])
        shade = (y * 255 // max(height - 1, 1)) & 0xC0
        row[0::3] = bytes((b & 0x3F) | shade for b in row[0::3])   # red follows the rows
        rows.append(b"\0" + bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))


def picture(seed: int):
    return [File("/picture.png", lambda: png(seed, 434, 434))]


# S1's photos: 30 + 30 in two resolutions, ~323 KB on average.
PHOTO_SIZES = {"large": (1200, 900), "small": (680, 510)}
PHOTOS_EACH = 30
PHOTO_URLS = tuple((f"/photos/{res}/{i:02d}.jpg", 1)
                   for res in PHOTO_SIZES for i in range(PHOTOS_EACH))


def jpeg(seed: int, width: int, height: int) -> bytes:
    """A photo-like JPEG: a gradient blended with noise (Pillow, quality 85)."""
    from PIL import Image
    rng = random.Random(seed)
    base = Image.linear_gradient("L").rotate(rng.randrange(360)).resize((width, height))
    noise = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    img = Image.blend(base.convert("RGB"), noise, 0.3 + rng.random() * 0.1)
    out = io.BytesIO()
    img.save(out, "JPEG", quality=85, optimize=False, progressive=False)
    return out.getvalue()


def photos(seed: int):
    files = []
    for n, (path, _) in enumerate(PHOTO_URLS):
        res = path.split("/")[2]
        files.append(File(path, lambda n=n, res=res: jpeg(seed * 1000 + n,
                                                          *PHOTO_SIZES[res])))
    return files


@dataclass(frozen=True)
class LargeSet:
    """How many files of each size (MB); S1's full set is 250×1, 250×5, 250×10, 60×25."""

    counts: tuple[tuple[int, int], ...]   # (size_mb, count)
    checked_per_size: int                 # how many of each size verify fetches

    @property
    def total_mb(self) -> int:
        return sum(size * count for size, count in self.counts)


LARGE_FULL = LargeSet(((1, 250), (5, 250), (10, 250), (25, 60)), 2)
LARGE_SMALL = LargeSet(((1, 4), (5, 4), (10, 4), (25, 1)), 4)


def scaled(total_bytes: int) -> LargeSet:
    """S1's full set in its proportions, scaled to about `total_bytes` (at least one
    file of each size): a set larger than a machine profile's memory without S1's 5.5 GB
    on every filesystem (e.g. twice machine.memory_mb)."""
    factor = total_bytes / (LARGE_FULL.total_mb * MB)
    return LargeSet(tuple((size, max(1, round(count * factor)))
                          for size, count in LARGE_FULL.counts), 2)


def _large_paths(spec: LargeSet) -> list[tuple[str, int]]:
    return [(f"/files/{size}m-{i:03d}.bin", size) for size, count in spec.counts
            for i in range(count)]


def large_urls(spec: LargeSet) -> tuple[tuple[str, int], ...]:
    """Every file once, equally likely: the request mix follows the set's proportions."""
    return tuple((path, 1) for path, _ in _large_paths(spec))


def large_files(spec: LargeSet):
    def build(seed: int):
        files = []
        for n, (path, size) in enumerate(_large_paths(spec)):
            index = int(path.rsplit("-", 1)[1].split(".")[0])
            files.append(File(path, lambda n=n, size=size: random.Random(
                seed * 100_003 + n).randbytes(size * MB),
                check=index < spec.checked_per_size))
        return files
    return build
