"""nginx, started from our own template with `-p <run dir>`; never /etc/nginx."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from ...errors import StackError
from ..base import Component, RenderContext
from ..templates import render_template
from .knobs import KNOBS

HERE = Path(__file__).parent


class Nginx(Component):
    name = "nginx"
    package = "nginx"
    binary = "/usr/sbin/nginx"
    knobs = KNOBS

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        (ctx.run_dir / "tmp").mkdir(exist_ok=True)
        return {"nginx.conf": render_template(HERE / "nginx.conf.j2", ctx, knobs)}

    def command(self, ctx: RenderContext) -> list[str]:
        return [self.binary, "-p", str(ctx.run_dir), "-c", str(ctx.run_dir / "nginx.conf"),
                "-e", str(ctx.run_dir / "error.log")]

    def version(self) -> str:
        try:
            out = subprocess.run([self.binary, "-v"], capture_output=True, text=True,
                                 timeout=10).stderr
        except OSError as e:
            raise StackError(f"nginx: cannot run {self.binary}: {e}") from e
        m = re.search(r"nginx/(\S+)", out)
        if not m:
            raise StackError(f"nginx: unexpected version output {out.strip()!r}")
        return m.group(1)
