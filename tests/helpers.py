"""Helpers shared by the tests (fixtures live in conftest.py)."""

import os
from pathlib import Path

import pytest

from stacklab.drive import REPO_ENGINE

ROOT = Path(__file__).resolve().parent.parent


def require_engine():
    if not REPO_ENGINE.exists():
        pytest.fail(f"{REPO_ENGINE} is not built: run `make test` (it builds the engine)")


SERVER_BINARIES = {"nginx", "apache2", "php-fpm8.2", "php-cgi8.2", "mariadbd", "memcached",
                   "lighttpd", "mini_httpd", "webfsd", "stacklab-load"}


def server_processes() -> list[str]:
    """Command lines of server (or engine) processes started from stacklab's lab dir."""
    from stacklab.lab import default_root
    lab_root = str(default_root())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            if exe not in SERVER_BINARIES:
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if lab_root in cmdline or cwd.startswith(lab_root):
            found.append(cmdline)
    return found


def assert_golden(name: str, text: str) -> None:
    """Compare with tests/golden/<name>; STACKLAB_UPDATE_GOLDEN=1 rewrites it."""
    path = ROOT / "tests" / "golden" / name
    if os.environ.get("STACKLAB_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def rendered_stack(tmp_path, stack: str, knobs: dict, argv: bool = False) -> str:
    """Every config file a stack renders (and, with argv, each command line), with the
    temporary paths replaced by /LAB: what golden tests compare."""
    from stacklab.stacks import COMPONENTS, STACKS
    from stacklab.stacks.base import RenderContext
    text, upstreams = "", {}
    for name in reversed(STACKS[stack].components):
        comp = COMPONENTS[name]
        ctx = RenderContext(tmp_path / "RUN" / name, tmp_path / "DOCROOT", "127.0.0.1", 8080,
                            "www-data", "www-data", dict(upstreams),
                            {g: knobs[g] for g in STACKS[stack].groups},
                            tmp_path / "cert.pem", tmp_path / "key.pem")
        ctx.run_dir.mkdir(parents=True)
        for rel, content in sorted(comp.render(ctx, knobs[name]).items()):
            if rel != "conf.d/extensions.ini":    # depends on installed extensions
                text += f"==> {name}/{rel}\n{content}"
        if argv:
            text += f"==> {name} argv\n" + " ".join(comp.command(ctx, knobs[name])) + "\n"
        upstreams[name] = comp.endpoint(ctx, knobs[name])
    return text.replace(str(tmp_path), "/LAB")
