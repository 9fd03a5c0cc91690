"""HTTP/2 for the lab: the `http2` knob every server that speaks it shares, what the load
may ask of such a server as the stack's front (load.protocol), and the check that its
port speaks HTTP/2 exactly when the knob says so.

One knob, two protocols, as the servers configure them: with the server's tls on, HTTP/2
over TLS chosen by ALPN (h2, beside HTTP/1.1); with tls off, cleartext HTTP/2 by prior
knowledge (h2c). Apache and lighttpd also take HTTP/1.1 on an h2c port; nginx 1.22 does
not (a `listen … http2` port without ssl takes HTTP/2 only): its own checks then go to an
HTTP/1.1 listener of the same server (nginx/adapter.py).
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

from ..host.net import Endpoint, check_reachable
from ..knobs import Knob
from ..measure.drive import PROTOCOL_NEEDS
from ..measure.verify import Status, Verdict

# The client preface (RFC 9113 §3.4) and an empty SETTINGS frame: what an h2c client
# sends first; a server that speaks h2c answers with a SETTINGS frame (type 0x4).
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 0x4, 0, 0, 0, 0, 0])
SETTINGS = 0x4


def http2_knob(component: str, default: bool = False, meaning: str = "",
               **kwargs: Any) -> Knob:
    return Knob(component, "http2", bool, default, meaning or (
        "HTTP/2: with tls on, over TLS chosen by ALPN (h2, beside HTTP/1.1); with tls off, "
        "cleartext by prior knowledge (h2c). Asked by load.protocol = 'h2' or 'h2c'."),
        **kwargs)


def protocol_problem(component: str, k: dict[str, Any], protocol: str,
                     h2c_only: bool = False) -> str | None:
    """Why the load cannot speak `protocol` (load.protocol) to `component` as the stack's
    front with its knobs `k`, or None. `h2c_only`: its h2c port takes no HTTP/1.1."""
    tls, on = k.get("tls", False), k.get("http2", False)
    need = PROTOCOL_NEEDS.get(protocol)
    if need and tls != need["tls"] and protocol == "h2":
        return (f"HTTP/2 over TLS (ALPN) needs https URLs, and {component}.tls is off; "
                f"set {component}.tls = true, or load.protocol = 'h2c' (cleartext)")
    if need and tls != need["tls"]:
        return (f"cleartext HTTP/2 (prior knowledge) needs http URLs, and {component}.tls "
                f"is on; set {component}.tls = false, or load.protocol = 'h2' (over TLS)")
    if need and on != need["http2"]:
        return (f"{component}.http2 is off: {component} would answer HTTP/1.1; set "
                f"{component}.http2 = true")
    if protocol == "http/1.1" and h2c_only and on and not tls:
        return (f"{component}.http2 on with {component}.tls off makes a port that takes "
                f"cleartext HTTP/2 only (h2c, no HTTP/1.1): set load.protocol = 'h2c', or "
                f"{component}.http2 = false")
    return None


def check_http2(component: str, ep: Endpoint, on: bool) -> Verdict:
    """The server's port speaks HTTP/2 exactly when its http2 knob says so: over TLS, the
    server chooses h2 by ALPN when offered h2 and http/1.1; in cleartext, it answers an
    h2c client preface with a SETTINGS frame. Always its TCP port, the load's (not the
    unix socket nginx's other checks use)."""
    check_reachable(ep.host)
    try:
        if ep.scheme == "https":
            seen = _alpn(ep.host, ep.port)
            speaks = seen == "h2"
            said = f"offered h2 and http/1.1 by ALPN, the server chose {seen or 'neither'}"
        else:
            speaks, said = _h2c(ep.host, ep.port)
    except (OSError, ssl.SSLError) as e:
        return Verdict(component, "http2", Status.FAIL, f"could not ask: {e}")
    data = {"http2": on, "speaks_http2": speaks}
    if speaks == on:
        return Verdict(component, "http2", Status.PASS, said, data)
    return Verdict(component, "http2", Status.FAIL,
                   f"http2 is {'on' if on else 'off'} but {said}", data)


def _alpn(host: str, port: int) -> str | None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection((host, port), 5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.selected_alpn_protocol()


def _h2c(host: str, port: int) -> tuple[bool, str]:
    """Whether the port answers an h2c preface with a SETTINGS frame, and what it said
    (an HTTP/1.1 server answers its request line "PRI * HTTP/2.0" with an error, closes,
    or waits for more)."""
    with socket.create_connection((host, port), 5) as s:
        s.sendall(PREFACE)
        head = b""
        try:
            while len(head) < 9 and (chunk := s.recv(64)):
                head += chunk
        except ConnectionResetError:
            pass
        except TimeoutError:
            if not head:
                return False, "an h2c client preface had no answer in 5 s"
    if len(head) >= 9 and head[3] == SETTINGS:
        return True, "an h2c client preface was answered with a SETTINGS frame"
    shown = head.split(b"\r\n", 1)[0].decode("latin-1")[:60]
    return False, (f"an h2c client preface was answered {shown!r}" if head else
                   "an h2c client preface was answered by a close")
