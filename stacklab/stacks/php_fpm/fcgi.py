"""One FastCGI request to PHP-FPM itself, for its status page (pm.status_path): the page
is answered by FPM, not by a script, and no web server routes it (only .php reaches FPM
through the stack). Plain FastCGI 1.0 records over its unix socket or loopback TCP."""

from __future__ import annotations

import socket
import struct

from ...host.net import Endpoint, check_reachable

VERSION, BEGIN_REQUEST, END_REQUEST, PARAMS, STDIN, STDOUT = 1, 1, 3, 4, 5, 6
RESPONDER = 1
REQUEST_ID = 1


def _record(kind: int, content: bytes) -> bytes:
    return struct.pack(">BBHHBx", VERSION, kind, REQUEST_ID, len(content), 0) + content


def _length(n: int) -> bytes:
    return bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)


def _params(params: dict[str, str]) -> bytes:
    out = b""
    for name, value in params.items():
        k, v = name.encode(), value.encode()
        out += _length(len(k)) + _length(len(v)) + k + v
    return out


def _connect(ep: Endpoint, timeout_s: float) -> socket.socket:
    if ep.unix:
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(timeout_s)
        sock.connect(str(ep.unix))
        return sock
    check_reachable(ep.host)
    return socket.create_connection((ep.host, ep.port), timeout_s)


def get(ep: Endpoint, path: str, query: str = "", timeout_s: float = 5.0) -> tuple[str, bytes]:
    """GET `path?query` from FPM: (the CGI headers, the body)."""
    params = {"GATEWAY_INTERFACE": "CGI/1.1", "REQUEST_METHOD": "GET", "SCRIPT_NAME": path,
              "SCRIPT_FILENAME": path, "REQUEST_URI": f"{path}?{query}" if query else path,
              "DOCUMENT_URI": path, "QUERY_STRING": query, "SERVER_PROTOCOL": "HTTP/1.1",
              "REMOTE_ADDR": "127.0.0.1"}
    request = (_record(BEGIN_REQUEST, struct.pack(">HB5x", RESPONDER, 0))
               + _record(PARAMS, _params(params)) + _record(PARAMS, b"") + _record(STDIN, b""))
    out = b""
    with _connect(ep, timeout_s) as sock:
        sock.sendall(request)
        data = b""
        while True:
            while len(data) < 8:
                chunk = sock.recv(65536)
                if not chunk:
                    raise OSError("PHP-FPM closed the connection before END_REQUEST")
                data += chunk
            _, kind, _, length, padding = struct.unpack(">BBHHBx", data[:8])
            while len(data) < 8 + length + padding:
                chunk = sock.recv(65536)
                if not chunk:
                    raise OSError("PHP-FPM closed the connection inside a record")
                data += chunk
            content, data = data[8:8 + length], data[8 + length + padding:]
            if kind == STDOUT:
                out += content
            elif kind == END_REQUEST:
                break
    head, _, body = out.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body
