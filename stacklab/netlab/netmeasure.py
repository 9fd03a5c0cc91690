"""Measurements over a link: real bytes moved from a peer in the server namespace to a
peer in the client namespace (`measure_rate`), and a timed TCP ping-pong between them
(`measure_rtt`), so a shaped link is verified rather than trusted.

Apart from net.py because the peers are a program of their own (run with the
interpreter inside each namespace) and nothing in making or removing a link needs them;
`Link.measure_rate` and `Link.measure_rtt` call in here. What a measurement needs of a
link is the `Namespaces` protocol below (net.Link is one), so this module imports
nothing of net.py and net.py imports it: one direction, no circle.
"""

from __future__ import annotations

import json
import select
import statistics
import subprocess
import sys
from typing import Protocol

from ..errors import printable
from .netns import CMD_TIMEOUT_S, NetlabError, _run


class Namespaces(Protocol):
    """What a measurement needs of a link: its two namespaces, the server's address in
    its subnet, how to start a program in either, and its id to name it in an error."""

    run_id: str
    server_ns: str
    client_ns: str
    server_addr: str

    def exec_prefix(self, ns: str) -> list[str]: ...

# Peers started inside the namespaces: `send` and `echo` servers print their port when
# listening; the `recv` and `ping` clients print JSON. Socket timeouts end them however
# the other side fails.
_PEER = r"""
import json, socket, sys, time
mode, addr = sys.argv[1], sys.argv[2]
if mode in ("send", "echo"):
    s = socket.socket(); s.settimeout(60); s.bind((addr, 0)); s.listen(1)
    print(s.getsockname()[1], flush=True)
    c, _ = s.accept(); c.settimeout(60)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "send":
        left, chunk = int(sys.argv[3]), memoryview(bytes(1 << 20))
        while left > 0:
            left -= c.send(chunk[:min(left, len(chunk))])
        c.shutdown(socket.SHUT_WR); c.recv(1)
    else:
        while (data := c.recv(64)):
            c.sendall(data)
else:
    c = socket.create_connection((addr, int(sys.argv[3])), timeout=60)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "recv":
        buf, got, t0 = bytearray(1 << 20), 0, time.perf_counter()
        while (n := c.recv_into(buf)):
            got += n
        print(json.dumps({"bytes": got, "seconds": time.perf_counter() - t0}))
    else:
        samples = []
        for i in range(int(sys.argv[4]) + 5):
            t0 = time.perf_counter(); c.sendall(b"x")
            if c.recv(1) != b"x":
                raise SystemExit("echo lost")
            if i >= 5:
                samples.append(time.perf_counter() - t0)
        print(json.dumps({"rtt_s": samples}))
"""


def _exchange(link: Namespaces, server_mode: str, client_args: list[str], server_args: list[str],
              timeout: float) -> dict:
    """Run a peer server in the server namespace and a client in the client namespace;
    the client's JSON answer."""
    server = subprocess.Popen(
        link.exec_prefix(link.server_ns)
        + [sys.executable, "-c", _PEER, server_mode, link.server_addr, *server_args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], CMD_TIMEOUT_S)
        port = server.stdout.readline().strip() if ready else ""
        if not port.isdigit():
            server.kill()
            raise NetlabError(f"the {server_mode} peer in {link.server_ns} did not listen: "
                              f"{printable(server.communicate(timeout=5)[1].strip())}")
        client_mode = "recv" if server_mode == "send" else "ping"
        out = _run(link.exec_prefix(link.client_ns) + [
            sys.executable, "-c", _PEER, client_mode, link.server_addr, port, *client_args],
            timeout=timeout)
        server.wait(timeout=CMD_TIMEOUT_S)
        return json.loads(out)
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate()


def measure_rate(link: Namespaces, bits: int | None, nbytes: int = 20_000_000) -> float:
    """Bytes per second of one TCP transfer of `nbytes` from the server namespace to the
    client namespace, timed by the client from connect to the last byte; `bits` is the
    link's shaped rate in bits per second (None: unlimited), which sets the timeout."""
    if not isinstance(nbytes, int) or not 1 <= nbytes <= 10**10:
        raise ValueError(f"nbytes {nbytes!r} is not a byte count from 1 to 10^10")
    timeout = 30 + (3 * nbytes * 8 / bits if bits else 0)
    got = _exchange(link, "send", [], [str(nbytes)], timeout)
    if got["bytes"] != nbytes:
        raise NetlabError(f"the transfer over {link.run_id} delivered {got['bytes']} of "
                          f"{nbytes} bytes")
    return got["bytes"] / got["seconds"]


def measure_rtt(link: Namespaces, rounds: int = 50) -> float:
    """Median seconds of a 1-byte TCP ping-pong between the namespaces (after 5 rounds
    of warm-up)."""
    if not isinstance(rounds, int) or not 1 <= rounds <= 100_000:
        raise ValueError(f"rounds {rounds!r} is not a count from 1 to 100000")
    got = _exchange(link, "echo", [str(rounds)], [], 30 + rounds * 0.1)
    return statistics.median(got["rtt_s"])
