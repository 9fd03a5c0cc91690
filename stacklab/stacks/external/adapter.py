"""A server the user already runs, as a component that starts nothing.

stacklab renders no config, spawns no process and never stops or signals it: `start`
finds what is watched (watch.py) and asks the first path once (its Server header, for
the record), `verify` asks every path and FAILs one that does not answer 200, `stop`
leaves it running. Its content is what the server serves: the load asks its paths
(`target`), never a workload deployed by the lab. Its versions are not known — the
Server header is recorded as the server sent it, not as a version."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any, Callable

from ...errors import StackError
from ...measure.verify import Status, Verdict, fetch
from ...workloads import Deployed
from ..base import Component, RenderContext, RunningComponent
from .knobs import COMPONENT, KNOBS
from .target import Origin, is_remote, origin
from .watch import watched

NOT_STARTED = "(none: a server you run, started by you)"


class External(Component):
    name = COMPONENT
    package = NOT_STARTED
    binary = NOT_STARTED       # matches no process: stacklab starts none
    knobs = KNOBS

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        return {}

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        return []

    def installed(self) -> bool:
        return True

    def version(self) -> str:
        return "not known (a server you run)"

    def versions(self, knobs: dict[str, Any]) -> dict[str, str]:
        return {}            # never claimed: the Server header is recorded as sent

    def check(self, knobs: dict[str, Any]) -> str | None:
        if not knobs["url"]:
            return "external.url is not set: give [external] url = \"http://127.0.0.1:PORT/\""
        if knobs["weights"] and len(knobs["weights"]) != len(knobs["paths"]):
            return (f"external.weights has {len(knobs['weights'])} entries for "
                    f"{len(knobs['paths'])} paths: give one weight per path, or none")
        if knobs.get("cpus"):
            return ("external.cpus: stacklab does not start the server, so it cannot pin it "
                    "(pin it yourself, e.g. with taskset or systemd's CPUAffinity)")
        if knobs.get("nofile"):
            return "external.nofile: stacklab does not start the server, so cannot set it"
        return None

    def protocol_problem(self, knobs: dict[str, Any], protocol: str) -> str | None:
        """Any protocol its URL's scheme allows: whether the server speaks it is known
        only from the run (the engine's report; verify.check_protocol)."""
        scheme = knobs["url"].partition("://")[0]
        if protocol == "h2" and scheme != "https":
            return (f"HTTP/2 over TLS (ALPN) needs an https URL, and external.url is "
                    f"{knobs['url']!r}; set load.protocol = 'h2c' for cleartext HTTP/2")
        if protocol == "h2c" and scheme != "http":
            return (f"cleartext HTTP/2 (prior knowledge) needs an http URL, and external.url "
                    f"is {knobs['url']!r}; set load.protocol = 'h2' over TLS")
        return None

    def target(self, knobs: dict[str, Any], docroot: Path) -> Deployed:
        """What the load asks of it: its paths with their weights; `docroot` stays empty
        (nothing is deployed, and no probe is placed). Every path must answer 200, which
        `verify` checks, not the content check of a deployed workload."""
        weights = knobs["weights"] or [1] * len(knobs["paths"])
        docroot.mkdir(parents=True, exist_ok=True)
        return Deployed(COMPONENT, docroot, tuple(zip(knobs["paths"], weights)), {},
                        varying_length=frozenset(knobs["paths"]))

    def start(self, ctx: RenderContext, knobs: dict[str, Any],
              ready_timeout_s: float = 15.0, run_as: str | None = None) -> RunningComponent:
        """Nothing is started: the watched processes are found, and the first path asked
        once, so that a server that is not there fails the run with its URL."""
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        where = origin(knobs["url"])
        proc = watched(self.name, knobs["watch"])
        server = _server_header(where, knobs["paths"][0])
        record = {"url": knobs["url"], "paths": knobs["paths"], "weights": knobs["weights"],
                  "server_header": server, "remote": is_remote(where.host),
                  **proc.described()}
        files = {"external.json": json.dumps(record, indent=1) + "\n"}
        return RunningComponent(self.name, ctx, proc,  # type: ignore[arg-type]
                                knobs, where.endpoint, files)

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        """Every path answers 200; what was watched and where the target is, said."""
        where = origin(started.knobs["url"])
        out = path_verdicts(where, started.knobs["paths"])
        record = json.loads(started.files["external.json"])
        out.append(Verdict(self.name, "target", Status.PASS,
                           f"{where.base_url}, a server stacklab did not start (Server: "
                           f"{record['server_header'] or 'not sent'}; version not known)",
                           record))
        if not started.knobs["watch"]:
            out.append(Verdict(self.name, "watch", Status.WARN, "nothing watched: the "
                               "server's CPU and memory are not known (give [external] "
                               "watch = { pid = N }, { cgroup = ... } or { unit = ... })"))
        if record["remote"]:
            out.append(Verdict(self.name, "remote", Status.WARN, f"{where.host} is a remote "
                               "host (--allow-remote): its CPU, its other work and the "
                               "network between were not checked"))
        return out

    def cpu_counter(self, started: RunningComponent) -> Callable[[], float | None] | None:
        """Its watched cgroup's CPU seconds (watch.Watched.cpu_s): the server's processes
        are not a group stacklab started, and a cgroup counts every one that ran there."""
        return started.proc.cpu_s  # type: ignore[attr-defined]

    def stop(self, started: RunningComponent) -> None:
        """The server is the user's: it is left as it was."""

    def log_files(self, started: RunningComponent) -> list[Path]:
        return []


def path_verdicts(where: Origin, paths: list[str]) -> list[Verdict]:
    """One verdict per path: PASS on a 200, FAIL naming the URL and what came back (a
    status, or why no answer came: connection refused, a timeout)."""
    out = []
    for path in paths:
        url = where.base_url + path
        try:
            resp = fetch(where.endpoint, path)
        except (OSError, http.client.HTTPException) as e:
            out.append(Verdict(COMPONENT, f"content {path}", Status.FAIL,
                               f"GET {url}: {_why(e)}"))
            continue
        if resp.status != 200:
            out.append(Verdict(COMPONENT, f"content {path}", Status.FAIL,
                               f"GET {url} answered {resp.status}, not 200"))
        else:
            out.append(Verdict(COMPONENT, f"content {path}", Status.PASS,
                               f"200, {len(resp.body)} B", {"path": path,
                                                            "bytes": len(resp.body)}))
    return out


def _server_header(where: Origin, path: str) -> str | None:
    try:
        return fetch(where.endpoint, path).headers.get("server")
    except (OSError, http.client.HTTPException) as e:
        raise StackError(f"external.url {where.base_url}{path}: {_why(e)}") from None


def _why(e: BaseException) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused (is the server running?)"
    if isinstance(e, TimeoutError):
        return "no answer (timed out)"
    return getattr(e, "strerror", None) or str(e) or type(e).__name__
