"""Addresses of running components: loopback TCP or unix sockets."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Endpoint:
    """Where a running component can be reached: TCP host:port or a unix socket."""

    host: str
    port: int
    unix: Path | None = None
    scheme: str = "http"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def socket_ready(endpoint: Endpoint) -> bool:
    """Readiness for non-HTTP components: the socket accepts a connection."""
    if endpoint.unix:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(0.5)
            s.connect(str(endpoint.unix))
    else:
        socket.create_connection((endpoint.host, endpoint.port), 0.5).close()
    return True
