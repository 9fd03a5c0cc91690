"""The one interface every server component has: render, start, ready, verify, version, stop."""

from __future__ import annotations

import http.client
import os
import socket
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import procs
from ..errors import StackError
from ..knobs import Knob
from ..verify import Verdict


@dataclass(frozen=True)
class RenderContext:
    """Where and as whom a component runs; plain data handed to templates."""

    run_dir: Path          # this component's own directory (configs, logs, pid files)
    docroot: Path          # the deployed workload
    host: str              # loopback address it listens on
    port: int
    user: str | None       # user the server drops to (root only), None otherwise
    group: str | None


@dataclass
class Started:
    """A running component: its process and where it can be reached."""

    name: str
    ctx: RenderContext
    proc: procs.Proc
    files: dict[str, str] = field(default_factory=dict)  # rendered configs by name


class Component(ABC):
    name: str
    package: str   # the Debian package that provides it
    binary: str    # absolute path of the binary started
    knobs: list[Knob]

    @abstractmethod
    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        """Config files (relative name → text) for these knob values."""

    @abstractmethod
    def command(self, ctx: RenderContext) -> list[str]:
        """argv that starts the server in the foreground from the rendered configs."""

    @abstractmethod
    def version(self) -> str:
        """The installed version, or raise StackError if it is missing."""

    def installed(self) -> bool:
        return os.access(self.binary, os.X_OK)

    def verify(self, started: Started, expected: dict[str, tuple[str, int]]) -> list[Verdict]:
        """Checks that the running server does what its knobs claim; base: content."""
        from ..verify import check_content, fetch
        verdicts = []
        for path, (sha, length) in expected.items():
            resp = fetch(started.ctx.host, started.ctx.port, path)
            verdicts.append(check_content(self.name, resp, path, sha, length))
        return verdicts

    def start(self, ctx: RenderContext, knobs: dict[str, Any],
              ready_timeout_s: float = 15.0, run_as: str | None = None) -> Started:
        """Render, start and wait until ready. `run_as` starts the server as that user
        (root only): how tests check the unprivileged path when CI runs as root."""
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        files = self.render(ctx, knobs)
        for rel, text in files.items():
            (ctx.run_dir / rel).write_text(text)
        if run_as:
            _chown_tree(ctx.run_dir, run_as)
        proc = procs.spawn(self.name, self.command(ctx), ctx.run_dir,
                           ctx.run_dir / "server.out", user=run_as)
        started = Started(self.name, ctx, proc, files)
        try:
            self.wait_ready(started, ready_timeout_s)
        except BaseException:
            self.stop(started)
            raise
        return started

    def wait_ready(self, started: Started, timeout_s: float) -> None:
        """Poll until the server answers HTTP, while checking the process is alive
        (a bare accepting port is not enough: it may belong to someone else)."""
        from ..verify import fetch
        deadline = time.monotonic() + timeout_s
        while True:
            if not started.proc.alive():
                raise StackError(f"{self.name} exited with code {started.proc.popen.returncode} "
                                 "before becoming ready", self.log_tail(started))
            try:
                fetch(started.ctx.host, started.ctx.port, "/", timeout_s=0.5)
                if started.proc.alive():
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise StackError(f"{self.name} not ready on {started.ctx.host}:"
                                 f"{started.ctx.port} after {timeout_s:g} s",
                                 self.log_tail(started))
            time.sleep(0.05)

    def log_files(self, started: Started) -> list[Path]:
        return sorted(p for p in started.ctx.run_dir.iterdir()
                      if p.suffix in (".log", ".out"))

    def log_tail(self, started: Started, lines: int = 20) -> str:
        return "\n".join(f"[{p.name}] {procs.log_tail(p, lines)}"
                         for p in self.log_files(started) if p.stat().st_size)

    def stop(self, started: Started) -> None:
        procs.stop(started.proc)
        if procs.group_members(started.proc.pgid):
            raise StackError(f"{self.name}: processes of group {started.proc.pgid} survived stop")


def _chown_tree(root: Path, user: str) -> None:
    import pwd
    entry = pwd.getpwnam(user)
    for path in [root, *root.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
