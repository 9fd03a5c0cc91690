"""Verdicts: what a variant was checked to really do before it is measured."""

from __future__ import annotations

import hashlib
import http.client
from dataclasses import asdict, dataclass
from enum import Enum


class Status(str, Enum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Verdict:
    component: str
    check: str
    status: Status
    detail: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        return d


def any_fail(verdicts: list[Verdict]) -> bool:
    return any(v.status is Status.FAIL for v in verdicts)


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


def fetch(host: str, port: int, path: str, headers: dict[str, str] | None = None,
          timeout_s: float = 5.0) -> Response:
    """One plain HTTP/1.1 GET on loopback (used for readiness and verification only)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        body = r.read()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, body)
    finally:
        conn.close()


def check_content(component: str, resp: Response, path: str, sha256: str,
                  length: int) -> Verdict:
    """The response is the expected content: status 200, length, content hash."""
    if resp.status != 200:
        return Verdict(component, f"content {path}", Status.FAIL, f"status {resp.status}")
    if len(resp.body) != length or resp.sha256 != sha256:
        return Verdict(component, f"content {path}", Status.FAIL,
                       f"got {len(resp.body)} B sha256 {resp.sha256[:12]}, "
                       f"expected {length} B sha256 {sha256[:12]}")
    return Verdict(component, f"content {path}", Status.PASS,
                   f"200, {length} B, sha256 {sha256[:12]}")
