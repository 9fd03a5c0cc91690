"""Verify precompressed serving over the wire (nginx.gzip_static, apache.precompressed).

A client that accepts gzip must receive the bytes of file.gz itself (not a compression
made on the fly, which differs from gzip -9's), with Content-Encoding gzip, decoding to
the original; a client that does not must receive the original. With the knob off, the
.gz file must never be what is sent.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from ..host.net import Endpoint
from ..measure.verify import Status, Verdict, fetch

CHECK = "precompressed"


def check_precompressed(component: str, ep: Endpoint, docroot: Path, path: str,
                        on: bool) -> Verdict:
    original = (docroot / path.lstrip("/")).read_bytes()
    stored = (docroot / (path.lstrip("/") + ".gz")).read_bytes()
    asked = fetch(ep, path, {"Accept-Encoding": "gzip"})
    plain = fetch(ep, path)
    encoding = asked.headers.get("content-encoding")
    problem = None
    if plain.body != original or plain.headers.get("content-encoding"):
        problem = "a client without Accept-Encoding did not get the original file"
    elif not on:
        if asked.body == stored:
            problem = "the knob is off but the precompressed .gz file was sent"
    elif encoding != "gzip":
        problem = f"Content-Encoding is {encoding or '(none)'}, expected gzip"
    elif asked.body != stored:
        problem = (f"got {len(asked.body)} gzip bytes that are not the {len(stored)} B of "
                   f"{path}.gz (compressed on the fly?)")
    elif _gunzip(asked.body) != original:
        problem = "the .gz body does not decode to the original"
    if problem:
        return Verdict(component, CHECK, Status.FAIL, problem)
    if not on:
        return Verdict(component, CHECK, Status.PASS, "the .gz file is not served")
    return Verdict(component, CHECK, Status.PASS,
                   f"{path}.gz served as is ({len(original)} → {len(stored)} B), "
                   f"Vary: {asked.headers.get('vary', '(none)')}",
                   {"bytes": len(original), "encoded_bytes": len(stored)})


def _gunzip(body: bytes) -> bytes | None:
    try:
        return gzip.decompress(body)
    except (OSError, EOFError, zlib.error):
        return None
