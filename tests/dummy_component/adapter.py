"""Python's own http.server (the python3 already on the machine), started in the
foreground from a rendered launcher script. It cannot drop privileges, so it runs as
whoever starts it; it serves the docroot it is started in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stacklab.stacks.base import Component, RenderContext, RunningComponent
from stacklab.stacks.templates import render_template
from stacklab.measure.verify import CHECK_PATH, Verdict, check_keepalive

from .knobs import COMPONENT, KNOBS

HERE = Path(__file__).parent


class PyHttp(Component):
    name = COMPONENT
    package = "python3-minimal"
    binary = "/usr/bin/python3"
    version_args = ("--version",)
    version_pattern = r"Python (\S+)"
    knobs = KNOBS

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        protocol = "HTTP/1.1" if knobs["keepalive"] else "HTTP/1.0"
        return {"serve.sh": render_template(HERE / "serve.sh.j2", ctx, knobs,
                                            python=self.binary, protocol=protocol)}

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        return [str(ctx.run_dir / "serve.sh")]

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        return [check_keepalive(self.name, started.endpoint, CHECK_PATH,
                                started.knobs["keepalive"])]
