"""Where an external server is and whether the lab may load it: its origin (scheme, host,
port) parsed once, the target rule (loopback only, unless the user's --allow-remote on the
command line), and the check before measuring that every path answers 200.

The rule is the engine's own (engine/src/target.rs); it is applied here as well so that a
remote URL is refused before anything runs, with a line that names external.url and the
flag, rather than by the engine in the middle of a run.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from dataclasses import dataclass

from ...host.net import Endpoint

SCHEMES = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Origin:
    """A server's origin: what a run's URLs start with (`base_url`, no trailing slash)."""

    scheme: str
    host: str
    port: int

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.host, self.port, scheme=self.scheme)

    @property
    def base_url(self) -> str:
        return self.endpoint.base_url


def origin(url: str) -> Origin:
    """`scheme://host[:port][/]` as an Origin; ValueError saying what is wrong. A path
    prefix, a query, user information or an IPv6 literal are refused: the paths say what
    is asked, and the lab's endpoints name a host as text (127.0.0.1, localhost)."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ValueError("contains whitespace or control characters")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ValueError("expected http://host:port/ or https://host:port/")
    if "@" in parts.netloc:
        raise ValueError("user information in the URL is not supported")
    if parts.netloc.startswith("["):
        raise ValueError("IPv6 literals are not supported yet: use 127.0.0.1 or localhost")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("give the origin only (scheme://host:port/); the URLs to ask go "
                         "in external.paths")
    try:
        port = parts.port or SCHEMES[parts.scheme]
    except ValueError:
        raise ValueError("the port is not a number 1..65535") from None
    if not parts.hostname:
        raise ValueError("no host")
    return Origin(parts.scheme, parts.hostname, port)


# The one name looked up without --allow-remote: /etc/hosts gives it, not DNS (the
# engine's rule, engine/src/target.rs).
LOCAL_NAME = "localhost"


def addresses(host: str) -> list[str]:
    """Every address `host` resolves to (the engine connects to one of them); OSError when
    it resolves to none."""
    return sorted({info[4][0] for info in socket.getaddrinfo(host, None,
                                                             type=socket.SOCK_STREAM)})


def literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `host` is written as, or None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def remote_addresses(host: str) -> list[str]:
    """The addresses of `host` that are not loopback (127.0.0.0/8, ::1): [] for a local
    server. A literal is itself, not looked up; a name is resolved, as the engine
    resolves it (only `localhost`, or any name with --allow-remote: remote_problem)."""
    found = [str(ip)] if (ip := literal(host)) is not None else addresses(host)
    return [a for a in found if not ipaddress.ip_address(a.split("%")[0]).is_loopback]


def is_remote(host: str) -> bool:
    if (ip := literal(host)) is not None:
        return not ip.is_loopback
    try:
        return bool(remote_addresses(host))
    except OSError:
        return True          # unresolvable here: nothing says it is this machine


def remote_problem(url: str, allow_remote: bool) -> str | None:
    """Why the lab may not load `url`, or None: a host that is not loopback needs the
    user's --allow-remote (a command-line flag, never an experiment file's value).
    Decided on the literal before anything is looked up: without --allow-remote a name
    other than `localhost` is refused unresolved (a lookup leaves the machine, and DNS may
    say loopback now and another host later), as the engine refuses it."""
    host = origin(url).host
    if literal(host) is None and host != LOCAL_NAME and not allow_remote:
        return (f"host {host!r} is a name, and names other than {LOCAL_NAME} are looked up "
                "through DNS: use an IP literal (127.0.0.1) or pass --allow-remote on the "
                "command line")
    try:
        remote = remote_addresses(host)
    except OSError as e:
        return f"host {host!r} cannot be resolved here ({e.strerror or e})"
    if remote and not allow_remote:
        return (f"host {host} ({', '.join(remote)}) is not loopback: stacklab loads only "
                "this machine unless you pass --allow-remote on the command line")
    return None
