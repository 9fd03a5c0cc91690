"""Helpers shared by the tests (fixtures live in conftest.py)."""

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from stacklab.measure.drive import REPO_ENGINE

ROOT = Path(__file__).resolve().parent.parent


def require_engine():
    if not REPO_ENGINE.exists():
        pytest.fail(f"{REPO_ENGINE} is not built: run `make test` (it builds the engine)")


def wait_for(condition, timeout_s: float, what: str):
    """Poll condition() until it returns something true, and return it; fail naming `what`
    once timeout_s has passed (a wait on a condition, never a bare sleep)."""
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s:g} s: {what}")
        time.sleep(0.02)
    return found


def require_root(what: str) -> None:
    """Fail (never skip) when not root: `make test` runs as root, as the README says."""
    if os.getuid() != 0:
        pytest.fail(f"needs root ({what}); run the tests as root, as `make test` does")


def tamper(monkeypatch, component: str, file: str, pattern: str, replacement: str) -> None:
    """From now on (for this test) `component` renders `file` with `pattern` (a regex that
    must match) replaced: the server runs a config its knobs do not describe."""
    import re

    from stacklab.stacks import COMPONENTS
    cls = type(COMPONENTS[component])
    real = cls.render

    def render(self, ctx, knobs):
        files = real(self, ctx, knobs)
        files[file], n = re.subn(pattern, replacement, files[file], flags=re.M)
        assert n, f"{pattern!r} is not in {component}'s {file}: its template changed"
        return files

    monkeypatch.setattr(cls, "render", render)


def server_binaries() -> set[str]:
    """What a server (or the engine) process runs, as /proc/<pid>/exe names it: every
    registered component's binary (so a new component is counted by its registry line
    alone), the php-cgi Apache starts, and the engine."""
    from stacklab.stacks import COMPONENTS
    from stacklab.stacks.php import install
    return {os.path.basename(os.path.realpath(path)) for path in (
        *(c.binary for c in COMPONENTS.values()), install.CGI_BINARY, REPO_ENGINE)}


def server_processes() -> list[str]:
    """Command lines of server (or engine) processes this test run started, itself or
    through a stacklab command it ran: descendants of this process (conftest makes it a
    child subreaper, so orphans stay descendants). Other stacklab runs on the machine,
    and their servers, are never counted."""
    me, found, binaries = os.getpid(), [], server_binaries()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            if exe not in binaries or not _descends_from(int(pid), me):
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        found.append(cmdline.replace(b"\0", b" ").decode())
    return found


def _descends_from(pid: int, ancestor: int) -> bool:
    from stacklab.host.procs import proc_stat
    while pid > 1:
        fields = proc_stat(pid)
        if fields is None:
            return False
        pid = int(fields[1])             # the parent
        if pid == ancestor:
            return True
    return False


GOLDEN = ROOT / "tests" / "golden"


def assert_golden(name: str, text: str, directory: Path = GOLDEN) -> None:
    """Compare with tests/golden/<name>. STACKLAB_UPDATE_GOLDEN=1 rewrites the file and
    then fails, saying so: an update can never turn the suite green by itself (review the
    diff, then rerun without it)."""
    path = directory / name
    if os.environ.get("STACKLAB_UPDATE_GOLDEN"):
        same = path.exists() and path.read_text() == text
        path.write_text(text)
        pytest.fail(f"STACKLAB_UPDATE_GOLDEN is set: rewrote {path} "
                    f"({'unchanged' if same else 'changed'}); review `git diff` and rerun "
                    "without it", pytrace=False)
    assert text == path.read_text(), (f"{path} differs from what is rendered now "
                                      "(STACKLAB_UPDATE_GOLDEN=1 rewrites it, then fails)")


# Each server's own config test, added to the command line it would be started with.
CONFIG_TEST_FLAGS = {"nginx": ["-t"], "apache": ["-t"], "lighttpd": ["-tt"], "php-fpm": ["-t"]}


def assert_rendered_golden(base: Path, stack: str, knobs: dict, golden: str,
                           argv: bool = False) -> None:
    """Render every component of `stack`, write the files where they were rendered for,
    have each server check them with its own config test (nginx -t, apache2 -t,
    lighttpd -tt, php-fpm -t), then compare them with tests/golden/<golden>.txt."""
    from stacklab.stacks import COMPONENTS
    text, rendered = rendered_stack(base, stack, knobs, argv)
    for name, ctx in rendered:
        flags = CONFIG_TEST_FLAGS.get(name)
        if flags is None:
            continue                      # configured by argv alone (mini_httpd, webfsd …)
        comp = COMPONENTS[name]
        env = comp.env(ctx, knobs[name])
        result = subprocess.run([*comp.command(ctx, knobs[name]), *flags], cwd=ctx.run_dir,
                                env=None if env is None else {**os.environ, **env},
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, (f"{name}'s config test rejects the rendered "
                                        f"{golden} files:\n{result.stdout}{result.stderr}")
    assert_golden(f"{golden}.txt", text)


def rendered_stack(base: Path, stack: str, knobs: dict, argv: bool = False):
    """Every config file a stack renders (and, with argv, each command line), with `base`
    replaced by /LAB: what golden tests compare; and each component's context. The files
    are written where they were rendered for, beside a docroot and a certificate, so that
    the servers can test them: `base` must be reachable by the server user (a lab
    session's directory is)."""
    from stacklab.stacks import COMPONENTS, STACKS
    from stacklab.stacks.base import RenderContext, Upstream
    from stacklab.stacks.tls import make_certificate
    text, upstreams, rendered = "", [], []
    (base / "DOCROOT").mkdir(exist_ok=True)
    for made, name in zip(make_certificate(base), ("cert.pem", "key.pem")):
        made.rename(base / name)
    for name in reversed(STACKS[stack].components):
        comp = COMPONENTS[name]
        ctx = RenderContext(base / "RUN" / name, base / "DOCROOT", "127.0.0.1", 8080,
                            "www-data", "www-data", tuple(upstreams),
                            {g: knobs[g] for g in STACKS[stack].groups},
                            base / "cert.pem", base / "key.pem")
        ctx.run_dir.mkdir(parents=True)
        for rel, content in sorted(comp.render(ctx, knobs[name]).items()):
            (ctx.run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (ctx.run_dir / rel).write_text(content)
            if rel != "conf.d/extensions.ini":    # depends on installed extensions
                text += f"==> {name}/{rel}\n{content}"
        if argv:
            text += f"==> {name} argv\n" + " ".join(comp.command(ctx, knobs[name])) + "\n"
        upstreams.append(Upstream(name, comp.endpoint(ctx, knobs[name]), tuple(
            cap.name for cap in comp.capabilities(knobs[name]))))
        rendered.append((name, ctx))
    return text.replace(str(base), "/LAB"), rendered


CHROMIUM = Path("/usr/bin/chromium")


def launch_chromium(p):
    """Debian's Chromium under Playwright `p`, with the flags that keep it off the network
    (its absence fails, saying what installs it)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium "
                    "(scripts/install-deps.sh --test)")
    return p.chromium.launch(executable_path=str(CHROMIUM), args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"])


def watched_page(browser, width: int = 1200):
    """A new page and the lists its console errors and requests are collected into."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    return page, errors, requests


def shared_session():
    """A module's `session` fixture that is the module's one session (conftest's
    module_session): `session = shared_session()`."""
    @pytest.fixture(scope="module")
    def session(module_session):
        return module_session
    return session


class BodyHandler(BaseHTTPRequestHandler):
    """A keep-alive HTTP/1.1 handler answering every GET with 200 and the server's
    `body` once its `delay_s()` has passed (a server without one answers at once); it
    logs nothing. The engine tests' known servers subclass ThreadingHTTPServer with it."""

    protocol_version = "HTTP/1.1"     # keep-alive, as the engine expects by default
    disable_nagle_algorithm = True    # head and body go in two writes: no 40 ms stalls

    def do_GET(self):
        delay = getattr(self.server, "delay_s", None)
        if delay is not None:
            time.sleep(delay())
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def serving(httpd: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    """`httpd` served from a thread of its own, shut down and closed after."""
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def free_port() -> int:
    """A TCP port free on loopback now."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


@contextmanager
def private_nginx(base: Path, servers: str, ports=(), prefix=()) -> Iterator[Path]:
    """A private nginx (never the system service) with its root at base/www, one worker,
    no access log and the given server blocks; started with `prefix` (`ip netns exec NS`
    to run it in a namespace), ready once its pid file is written and each of `ports`
    accepts on loopback; stopped at the end. Yields base/www."""
    import shutil
    import signal
    if not shutil.which("nginx"):
        pytest.fail("nginx is not installed: run `make test` (it installs the test dependencies)")
    (base / "www").mkdir(parents=True, exist_ok=True)
    (base / "tmp").mkdir(exist_ok=True)
    temp = " ".join(f"{d}_temp_path {base}/tmp;" for d in
                    ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (base / "nginx.conf").write_text(f"""
user root;
daemon off;
worker_processes 1;
pid {base}/nginx.pid;
error_log {base}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    {temp}
    root {base}/www;
{servers}
}}
""")
    proc = subprocess.Popen([*prefix, "nginx", "-p", str(base), "-c", str(base / "nginx.conf")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (base / "nginx.pid").exists() and all(map(listening, ports)), 10,
                 "nginx's listeners")
        yield base / "www"
    finally:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
