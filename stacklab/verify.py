"""Verify before measuring: verdicts on what a variant really does, checked over the wire."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import ssl
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from .net import Endpoint, check_reachable


# Every docroot has this small HTML file: the static URL knob checks (gzip, keep-alive) use.
CHECK_PATH = "/_stacklab/check.html"


class Status(StrEnum):
    """A verdict's status; its value is what the runs table stores and reports print."""

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Verdict:
    component: str
    check: str
    status: Status
    detail: str
    data: dict = field(default_factory=dict)   # figures behind the verdict, for reports


def any_fail(verdicts: Iterable[Verdict]) -> bool:
    return any(v.status is Status.FAIL for v in verdicts)


@dataclass(frozen=True)
class Expect:
    """What a URL of a workload must return. Static files: exact bytes; dynamic pages:
    a marker the body must contain."""

    sha256: str | None = None
    length: int | None = None
    contains: bytes | None = None
    content_type: str | None = None


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes          # as received (compressed if the server compressed it)
    will_close: bool

    def decoded(self) -> bytes:
        encoding = self.headers.get("content-encoding", "")
        if encoding == "gzip":
            return gzip.decompress(self.body)
        if encoding == "deflate":
            try:
                return zlib.decompress(self.body)
            except zlib.error:
                return zlib.decompress(self.body, -zlib.MAX_WBITS)
        return self.body


def connection(ep: Endpoint, timeout_s: float = 5.0) -> http.client.HTTPConnection:
    check_reachable(ep.host)
    if ep.scheme == "https":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(ep.host, ep.port, timeout=timeout_s, context=ctx)
    return http.client.HTTPConnection(ep.host, ep.port, timeout=timeout_s)


def request(conn: http.client.HTTPConnection, path: str,
            headers: dict[str, str] | None = None) -> Response:
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    body = r.read()
    return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, body, r.will_close)


def fetch(ep: Endpoint, path: str, headers: dict[str, str] | None = None,
          timeout_s: float = 5.0) -> Response:
    """One GET on a fresh connection (readiness and verification only, never load)."""
    conn = connection(ep, timeout_s)
    try:
        return request(conn, path, headers)
    finally:
        conn.close()


def check_content(front: Endpoint, expected: dict[str, Expect]) -> list[Verdict]:
    """Every URL of the workload returns what it should (status, length, content hash)."""
    verdicts = []
    for path, want in expected.items():
        resp = fetch(front, path)
        body, check = resp.decoded(), f"content {path}"
        problem = None
        if resp.status != 200:
            problem = f"status {resp.status}"
        elif want.sha256 and (len(body) != want.length or
                              hashlib.sha256(body).hexdigest() != want.sha256):
            problem = (f"got {len(body)} B sha256 {hashlib.sha256(body).hexdigest()[:12]}, "
                       f"expected {want.length} B sha256 {want.sha256[:12]}")
        elif want.contains and want.contains not in body:
            problem = f"body ({len(body)} B) lacks {want.contains[:40]!r}"
        if problem:
            verdicts.append(Verdict("stack", check, Status.FAIL, problem))
            continue
        what = f"sha256 {want.sha256[:12]}" if want.sha256 else "marker found"
        data = {"path": path, "bytes": len(body), **_compressed_size(front, path, resp)}
        verdicts.append(Verdict("stack", check, Status.PASS, f"200, {len(body)} B, {what}", data))
    return verdicts


_TEXT_TYPES = ("text/", "application/json", "application/javascript", "image/svg")


def _compressed_size(front: Endpoint, path: str, plain: Response) -> dict:
    """For text responses: what the stack sends to a client that accepts gzip (the
    reports' compression table). Binary responses are not asked twice."""
    if not plain.headers.get("content-type", "").startswith(_TEXT_TYPES):
        return {}
    asked = fetch(front, path, {"Accept-Encoding": "gzip"})
    return {"encoded_bytes": len(asked.body),
            "content_encoding": asked.headers.get("content-encoding")}


def check_keepalive(component: str, ep: Endpoint, path: str, on: bool) -> Verdict:
    """Two requests on one connection: the detail says what the wire showed (the first
    response's Connection header, whether the second request went over the same socket).
    This checks the server's setting, not the run's: whether the load engine reuses
    connections is load.keepalive, which verification does not see."""
    conn = connection(ep)
    try:
        first = request(conn, path)
        sock, header = conn.sock, first.headers.get("connection", "(none)")
        reused, how = False, "the server closed the connection after the first response"
        if not first.will_close:
            try:
                second = request(conn, path)
                reused = conn.sock is sock and second.status == first.status
                how = ("the second request reused the connection" if reused else
                       f"the second request got {second.status} on a new connection")
            except (http.client.RemoteDisconnected, ConnectionError):
                how = "the server dropped the connection before a second response"
    finally:
        conn.close()
    seen = f"Connection: {header}; {how}"
    scope = " (the server's keep-alive; the load's is load.keepalive)"
    data = {"connection_header": header, "second_request_reused": reused}
    if reused == on:
        return Verdict(component, "keep-alive", Status.PASS, seen + scope, data)
    return Verdict(component, "keep-alive", Status.FAIL,
                   f"keep-alive is {'on' if on else 'off'} but {seen}{scope}", data)


def check_gzip(component: str, ep: Endpoint, path: str, on: bool) -> Verdict:
    """Content-Encoding present exactly when compression is on and the client asks; the
    detail names the Content-Encoding and sizes seen."""
    asked = fetch(ep, path, {"Accept-Encoding": "gzip"})
    plain = fetch(ep, path)
    encoding = asked.headers.get("content-encoding")
    encoded = encoding == "gzip"
    seen = (f"with Accept-Encoding: gzip the response had Content-Encoding: "
            f"{encoding or '(none)'}, {len(asked.body)} B (plain {len(plain.body)} B)")
    # (not the content check's encoded_bytes: the report's compression table reads those)
    data = {"accept_gzip_encoding": encoding, "accept_gzip_bytes": len(asked.body),
            "plain_bytes": len(plain.body)}
    if plain.headers.get("content-encoding"):
        return Verdict(component, "gzip", Status.FAIL, "compressed without being asked: "
                       f"Content-Encoding: {plain.headers['content-encoding']}", data)
    if encoded != on:
        return Verdict(component, "gzip", Status.FAIL,
                       f"gzip is {'on' if on else 'off'} but {seen}", data)
    if encoded and asked.decoded() != plain.body:
        return Verdict(component, "gzip", Status.FAIL,
                       f"decompressed body differs from the plain one; {seen}", data)
    detail = (f"compressed {len(plain.body)} → {len(asked.body)} B" if encoded
              else f"not compressed ({len(plain.body)} B)")
    return Verdict(component, "gzip", Status.PASS, detail, data)


def check_expires(component: str, ep: Endpoint, path: str, want: int | None) -> Verdict:
    """Cache-Control max-age present exactly when an expires knob says so, with its value
    (`want`: seconds, what the knob's value means; None: no max-age)."""
    resp = fetch(ep, path)
    cache_control = resp.headers.get("cache-control", "")
    got = next((int(part.split("=", 1)[1]) for part in cache_control.replace(" ", "").split(",")
                if part.startswith("max-age=") and part[8:].isdigit()), None)
    ok = got == want
    seen = f"Cache-Control: {cache_control or '(none)'}"
    return Verdict(component, "expires", Status.PASS if ok else Status.FAIL,
                   seen + ("" if ok else f"; expected max-age={want}"))

