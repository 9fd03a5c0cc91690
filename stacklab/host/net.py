"""Addresses of running components: loopback TCP, unix sockets, or the server's end of a
lab veth pair (198.18.0.0/15, inside the lab's own namespaces only)."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

# RFC 2544's benchmarking range: the lab gives it only to veth ends inside its own network
# namespaces. Asked from the host's namespace it is routed off the machine (to whatever
# answers there), so no connection to it may start from the host's.
BENCHMARKING = ipaddress.ip_network("198.18.0.0/15")
_HOST_NS = os.stat("/proc/thread-self/ns/net").st_ino   # where stacklab started


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


def check_reachable(host: str) -> None:
    """Refuse (OSError) a benchmarking address from a thread in the host's namespace."""
    try:
        lab = ipaddress.ip_address(host) in BENCHMARKING
    except ValueError:
        return                                   # a name, or a unix socket's
    if lab and os.stat("/proc/thread-self/ns/net").st_ino == _HOST_NS:
        raise OSError(f"{host} is a lab address, reachable only inside the lab's network "
                      "namespaces; this thread is in the host's (nothing was sent)")


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
        check_reachable(endpoint.host)
        socket.create_connection((endpoint.host, endpoint.port), 0.5).close()
    return True
