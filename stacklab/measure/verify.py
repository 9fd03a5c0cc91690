"""Verify before measuring: verdicts on what a variant really does, checked over the wire."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import socket
import ssl
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from pathlib import Path

from .drive import CONDITIONAL_HEADERS, MAX_HEADER_CHARS, LoadReport, parse_header
from ..errors import clip
from ..host.net import Endpoint, check_reachable


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

    def __post_init__(self) -> None:
        # what is stored and printed: a 200 KB URL said by its start and its length
        object.__setattr__(self, "detail", clip(self.detail))


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
    # Request headers of the check (a logged-in page's session cookie).
    headers: tuple[tuple[str, str], ...] = ()


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


class UnixConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a unix socket: a server's own listener for the checks, beside a
    port that speaks another protocol (nginx 1.22's h2c port takes no HTTP/1.1)."""

    def __init__(self, path: Path, timeout_s: float):
        super().__init__("localhost", timeout=timeout_s)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.path))


def connection(ep: Endpoint, timeout_s: float = 5.0) -> http.client.HTTPConnection:
    """A connection to `ep` for the checks: its unix socket when it has one (the HTTP/1.1
    listener of a server whose port speaks h2c only), else its TCP port."""
    if ep.unix is not None and ep.scheme == "http":
        return UnixConnection(ep.unix, timeout_s)
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


def check_content(front: Endpoint, expected: dict[str, Expect],
                  php_log: Path | None = None) -> list[Verdict]:
    """Every URL of the workload returns what it should (status, length, content hash),
    and, for an application that logs PHP's errors to `php_log`, none of them logged a
    warning or worse."""
    verdicts = []
    seen = php_log.stat().st_size if php_log and php_log.exists() else 0
    for path, want in expected.items():
        resp = fetch(front, path, dict(want.headers) or None)
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
        what = (f"sha256 {want.sha256[:12]}" if want.sha256 else
                "marker found" if want.contains else "status only")
        data = {"path": path, "bytes": len(body),
                **_compressed_size(front, path, resp, dict(want.headers))}
        verdicts.append(Verdict("stack", check, Status.PASS, f"200, {len(body)} B, {what}", data))
    if php_log is not None:
        verdicts.append(check_php_log(php_log, seen))
    return verdicts


# What PHP writes to its error log for a problem a page's content may not show (production
# settings: display_errors off). Deprecations and notices are not problems of the run.
PHP_PROBLEMS = ("PHP Warning:", "PHP Fatal error:", "PHP Parse error:",
                "PHP Recoverable fatal error:")


def check_php_log(php_log: Path, offset: int = 0) -> Verdict:
    """The application's PHP error log got no warning or error from offset on."""
    text = php_log.read_bytes()[offset:].decode(errors="replace") if php_log.exists() else ""
    bad = [line for line in text.splitlines() if any(p in line for p in PHP_PROBLEMS)]
    if bad:
        return Verdict("stack", "php errors", Status.FAIL,
                       f"{len(bad)} in {php_log.name}, first: {bad[0].strip()[:200]}")
    return Verdict("stack", "php errors", Status.PASS, f"no warning or error in {php_log.name}")


_TEXT_TYPES = ("text/", "application/json", "application/javascript", "image/svg")


def _compressed_size(front: Endpoint, path: str, plain: Response,
                     headers: dict[str, str]) -> dict:
    """For text responses: what the stack sends to a client that accepts gzip (the
    reports' compression table), asked with the check's own headers (a logged-in page's
    cookie: without it the figure would be the login redirect's). Binary responses are
    not asked twice."""
    if not plain.headers.get("content-type", "").startswith(_TEXT_TYPES):
        return {}
    asked = fetch(front, path, {**headers, "Accept-Encoding": "gzip"})
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


# load.conditional → the validator a 200 carries and the request field that sends it back
VALIDATORS = {"etag": ("ETag", "If-None-Match"),
              "last-modified": ("Last-Modified", "If-Modified-Since")}
PROBE_MAX_BYTES = 16 << 20
SHOWN_URLS = 3           # a verdict's detail names this many URLs, the others are counted


@dataclass(frozen=True)
class Exchange:
    """One GET read to the server's close: what came back as sent, body bytes included
    (http.client reads none after a 304, so it could not see a body sent with one)."""

    status: int
    headers: dict[str, str]   # lower-case names
    head_bytes: int
    body_bytes: int           # every byte after the head (framing included)

    @property
    def wire_bytes(self) -> int:
        return self.head_bytes + self.body_bytes


def exchange(ep: Endpoint, path: str, headers: dict[str, str], head_only: bool = False,
             timeout_s: float = 5.0) -> Exchange:
    """A GET with `headers` and Connection: close on a fresh connection, read to the end
    (or, `head_only`, to the end of the head: body_bytes then counts what came with it);
    verification only, never load."""
    conn = connection(ep, timeout_s)
    try:
        conn.connect()
        asked = {"Host": f"{ep.host}:{ep.port}", **headers, "Connection": "close"}
        head = f"GET {path} HTTP/1.1\r\n" + "".join(f"{n}: {v}\r\n" for n, v in asked.items())
        conn.sock.sendall((head + "\r\n").encode("ascii"))
        data = _read_to_close(conn.sock, head_only)
    finally:
        conn.close()
    raw, sep, body = data.partition(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if not sep or len(status) < 2 or not status[1].isdigit():
        raise http.client.BadStatusLine(lines[0][:100])
    fields = dict(line.partition(":")[::2] for line in lines[1:])
    return Exchange(int(status[1]), {k.strip().lower(): v.strip() for k, v in fields.items()},
                    len(raw) + len(sep), len(body))


def _read_to_close(sock, head_only: bool = False) -> bytes:
    data = bytearray()
    while len(data) <= PROBE_MAX_BYTES and not (head_only and b"\r\n\r\n" in data):
        try:
            chunk = sock.recv(65536)
        except ssl.SSLEOFError:        # a TLS peer that closes without close_notify
            break
        if not chunk:
            break
        data += chunk
    return bytes(data)


@dataclass(frozen=True)
class Requests:
    """What the load sends beyond the engine's own fields, checked before measuring: the
    condition load.conditional resolved to (load.headers go as written) and the verdict
    on what the server answers to a condition."""

    headers: tuple[tuple[str, str], ...] = ()
    verdicts: tuple[Verdict, ...] = ()


def verify_requests(front: Endpoint, paths: Iterable[str], load: dict) -> Requests:
    """Resolve load.conditional from the server's own validators, then, when a condition
    is sent (resolved or in load.headers), ask every URL once with the load's headers:
    304 without a body everywhere PASSes, nowhere FAILs, somewhere WARNs."""
    paths = list(paths)
    asked = {"Accept-Encoding": "gzip, deflate"} if load.get("compressed") else {}
    asked |= dict(parse_header(h) for h in load.get("headers", ()))
    resolved: tuple[tuple[str, str], ...] = ()
    if (mode := load.get("conditional", "none")) != "none":
        resolved, problem = _resolve(front, paths, mode, asked)
        if problem:
            return Requests((), (Verdict("load", "conditional GET", Status.FAIL, problem),))
    asked |= dict(resolved)
    if not any(name.lower() in CONDITIONAL_HEADERS for name in asked):
        return Requests(resolved)
    return Requests(resolved, (check_conditional(front, paths, asked),))


@dataclass(eq=False)
class RequestChecks:
    """The checks of what the load will ask (verify_requests) as a layer of a run
    (stacklab.run.layers), entered once the stack is up: `front` and `paths` are read then
    (the stack's front, the workload's URLs); `requests` holds the headers the load then
    sends. A FAIL is an invalid run, as the stack's own are."""

    front: Callable[[], Endpoint]
    paths: Callable[[], Iterable[str]]
    load: dict
    name = "load"
    waits = False
    requests: Requests = field(default_factory=Requests)

    @classmethod
    def problem(cls, knobs: dict[str, dict]) -> str | None:
        return None

    @contextmanager
    def entered(self) -> Iterator[Requests]:
        self.requests = verify_requests(self.front(), self.paths(), self.load)
        yield self.requests

    def verdicts(self) -> tuple[Verdict, ...]:
        return self.requests.verdicts

    def record(self) -> dict:
        return {}


def _resolve(front: Endpoint, paths: list[str], mode: str, asked: dict[str, str]
             ) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """The condition to send every URL: If-None-Match with each URL's ETag (a list, so that
    each URL matches its own), or If-Modified-Since with the latest Last-Modified. One
    engine header serves every URL; a URL without a validator shows in the check."""
    field_name, condition = VALIDATORS[mode]
    found, missing = {}, []
    for path in paths:
        got = exchange(front, path, asked, head_only=True)
        value = got.headers.get(field_name.lower())
        if got.status == 200 and value and (mode == "etag" or _http_date(value)):
            found[path] = value
        else:
            missing.append(f"{path} answered {got.status} with "
                           f"{f'{field_name}: {value}' if value else f'no {field_name}'}")
    if not found:
        more = f"; … ({len(missing)} URLs)" if len(missing) > SHOWN_URLS else ""
        return (), (f"load.conditional = {mode!r}: nothing to send as {condition} "
                    f"({'; '.join(missing[:SHOWN_URLS])}{more})")
    if mode == "last-modified":
        return ((condition, max(found.values(), key=_http_date)),), None
    value = ", ".join(dict.fromkeys(found.values()))
    if len(value) > MAX_HEADER_CHARS:
        return (), (f"load.conditional = 'etag': the ETags of {len(found)} URLs make an "
                    f"{condition} of {len(value)} characters, more than servers take in "
                    f"one field ({MAX_HEADER_CHARS} here): a workload with fewer URLs")
    return ((condition, value),), None


def _http_date(text: str) -> datetime | None:
    try:
        return parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None


def check_conditional(front: Endpoint, paths: list[str], asked: dict[str, str]) -> Verdict:
    """Each URL asked once with the load's headers: the detail says what the URLs
    answered (status, bytes after the head, bytes on the wire) to the condition sent,
    those that were not 304 without a body first."""
    sent = "; ".join(f"{n}: {v}" for n, v in asked.items()
                     if n.lower() in CONDITIONAL_HEADERS)
    answers = {path: exchange(front, path, asked) for path in paths}
    hits = [p for p, a in answers.items() if a.status == 304 and not a.body_bytes]
    data = {"sent": sent, "answers": {p: {"status": a.status, "body_bytes": a.body_bytes,
                                          "wire_bytes": a.wire_bytes}
                                      for p, a in answers.items()}}
    said = sent if len(sent) <= 120 else sent[:119] + "…"
    shown = sorted(answers, key=lambda p: p in hits)[:SHOWN_URLS]
    seen = ", ".join(f"{p} {answers[p].status} with {answers[p].body_bytes} B of body "
                     f"({answers[p].wire_bytes} B in all)" for p in shown)
    if len(answers) > len(shown):
        seen += f", … ({len(answers)} URLs)"
    if len(hits) == len(answers):
        return Verdict("load", "conditional GET", Status.PASS,
                       f"304 Not Modified without a body to {said}: {seen}", data)
    if not hits:
        return Verdict("load", "conditional GET", Status.FAIL,
                       f"{said} was not answered 304 without a body: {seen} (the server "
                       "ignores the condition, or its validator is not the one sent)", data)
    return Verdict("load", "conditional GET", Status.WARN,
                   f"{len(hits)} of {len(answers)} URLs answered 304 without a body to "
                   f"{said}: {seen}; the load mixes 304s and full responses", data)


def check_protocol(asked: str, load: LoadReport) -> Verdict | None:
    """The load spoke the protocol load.protocol asked: the engine's report says what the
    responses came in (and, over TLS, what the server chose by ALPN). A server that
    answers HTTP/1.1 to an HTTP/2 run measures another protocol than the trial says, or
    nothing (every request a `tls` error): FAIL, naming both. None for an HTTP/1.1 run,
    which the engine cannot speak otherwise."""
    if asked == "http/1.1":
        return None
    got, alpn = load.protocol, load.tls.alpn if load.tls else None
    data = {"asked": asked, "got": got, "alpn": alpn}
    chose = f" (the server chose {alpn!r} by ALPN)" if alpn else ""
    if got == asked:
        return Verdict("load", "protocol", Status.PASS,
                       f"the responses came in {got}{chose}", data)
    if got is None:
        seen = (f"no response came: the server chose {alpn!r} by ALPN" if alpn else
                "no response came in any protocol" if load.completed == 0 else
                "the engine's report does not say which protocol the responses came in "
                "(a report older than schema 4)")
        return Verdict("load", "protocol", Status.FAIL,
                       f"load.protocol = {asked!r} but {seen}", data)
    return Verdict("load", "protocol", Status.FAIL,
                   f"load.protocol = {asked!r} but the responses came in {got}{chose}", data)
