"""Apache httpd 2.4, started as `apache2 -f <our config> -DFOREGROUND`; never /etc/apache2."""

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
MODULES = "/usr/lib/apache2/modules"


class Apache(Component):
    name = "apache"
    package = "apache2"
    binary = "/usr/sbin/apache2"
    knobs = KNOBS

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        return {"httpd.conf": render_template(HERE / "httpd.conf.j2", ctx, knobs,
                                              modules=MODULES)}

    def command(self, ctx: RenderContext) -> list[str]:
        return [self.binary, "-f", str(ctx.run_dir / "httpd.conf"), "-DFOREGROUND"]

    def version(self) -> str:
        try:
            out = subprocess.run([self.binary, "-v"], capture_output=True, text=True,
                                 timeout=10).stdout
        except OSError as e:
            raise StackError(f"apache: cannot run {self.binary}: {e}") from e
        m = re.search(r"Apache/(\S+)", out)
        if not m:
            raise StackError(f"apache: unexpected version output {out.strip()!r}")
        return m.group(1)
