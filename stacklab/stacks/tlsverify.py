"""Verify TLS over the wire: protocol, cipher, refused protocols, and session resumption."""

from __future__ import annotations

import socket
import ssl
from typing import Any

from ..host.net import Endpoint, check_reachable
from ..measure.verify import Status, Verdict

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _context(version: str | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if version:
        ctx.minimum_version = ctx.maximum_version = _VERSIONS[version]
    return ctx


def _handshake(ep: Endpoint, ctx: ssl.SSLContext, session=None) -> ssl.SSLSocket:
    check_reachable(ep.host)
    raw = socket.create_connection((ep.host, ep.port), 5)
    tls = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
    # One request, so TLS 1.3 session tickets (sent after the handshake) arrive.
    tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    while tls.recv(65536):
        pass
    return tls


def check_tls(component: str, ep: Endpoint, k: dict[str, Any]) -> list[Verdict]:
    out = []
    allowed = k["tls_protocols"].split()
    ctx = _context()
    try:
        first = _handshake(ep, ctx)
    except (OSError, ssl.SSLError) as e:
        return [Verdict(component, "tls", Status.FAIL, f"handshake failed: {e}")]
    version, cipher = first.version(), first.cipher()[0]
    best = max(allowed, key=lambda v: _VERSIONS[v])
    out.append(Verdict(component, "tls protocol", Status.PASS if version == best else Status.FAIL,
                       f"negotiated {version}, {cipher}" + ("" if version == best else
                                                            f"; expected {best}")))
    for v in _VERSIONS:
        if v not in allowed:
            try:
                _handshake(ep, _context(v)).close()
                out.append(Verdict(component, f"tls refuses {v}", Status.FAIL,
                                   f"{v} is not configured but a handshake succeeded"))
            except (OSError, ssl.SSLError):
                out.append(Verdict(component, f"tls refuses {v}", Status.PASS, "refused"))
    if k["tls_ciphers"] != "default" and "TLSv1.2" in allowed:
        try:
            c = _handshake(ep, _context("TLSv1.2")).cipher()[0]
            ok = c == k["tls_ciphers"]
            out.append(Verdict(component, "tls cipher", Status.PASS if ok else Status.FAIL,
                               f"TLS 1.2 cipher {c}" + ("" if ok else
                                                        f"; expected {k['tls_ciphers']}")))
        except (OSError, ssl.SSLError) as e:
            out.append(Verdict(component, "tls cipher", Status.FAIL, f"TLS 1.2 failed: {e}"))
    session = first.session
    first.close()
    want = k["tls_session_cache"] or k["tls_session_tickets"]
    try:
        again = _handshake(ep, ctx, session=session)
        resumed = again.session_reused
        again.close()
    except (OSError, ssl.SSLError) as e:
        return out + [Verdict(component, "tls resumption", Status.FAIL, f"second handshake: {e}")]
    out.append(Verdict(component, "tls resumption",
                       Status.PASS if resumed == want else Status.FAIL,
                       f"session {'resumed' if resumed else 'not resumed'}, "
                       f"{'expected' if resumed == want else 'NOT expected'} with "
                       f"cache={k['tls_session_cache']} tickets={k['tls_session_tickets']}"))
    return out
