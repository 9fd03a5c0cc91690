"""nginx, started from our own template with `-p <run dir>`; never /etc/nginx."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ...host import lab
from ...host.net import Endpoint
from ...measure.verify import (CHECK_PATH, Status, Verdict, check_expires, check_gzip,
                       check_keepalive, fetch)
from ..base import RenderContext, RunningComponent
from ..http2 import check_http2, protocol_problem
from ..templates import render_template
from ..precompressed_verify import check_precompressed
from ..tlsrules import tls_inert
from ..tlsverify import check_tls
from .. import userconf
from . import configtest
from .knobs import KNOBS

HERE = Path(__file__).parent
STATUS_PATH = "/_stacklab/nginx-status"    # stub_status, loopback only, not logged
# The HTTP/1.1 listener of an h2c server (nginx.http2 on, tls off), in its run directory:
# what readiness, verification and stub_status reach, since the port takes h2c only.
CHECKS_SOCKET = "http1.sock"
COUNTED = 3        # requests the "requests counted" check sends between two readings
# nginx 1.22 serving h2c with sendfile on: every small response waits ~48 ms (3 s runs,
# one each, this 2-core VM, 2026-11-29; tcp_nopush off changed nothing: 341 req/s). Over
# TLS nginx does not use sendfile, and HTTP/1.1 with it on is fast.
H2C_SENDFILE = ("nginx 1.22 serving cleartext HTTP/2 (h2c) with sendfile on holds each "
                "small response ~48 ms when its connection has no other stream open, a "
                "stall and not HTTP/2's cost: measured here, one stream per connection, "
                "static-page 352 req/s at c=16 against 34,915 with sendfile off (21 against "
                "25,323 at c=1), photos 2,061 against 5,348, while HTTP/1.1 with sendfile "
                "on did 46,758 (with 2 streams per connection: 30,244 at c=4, p50 0.26 ms); "
                "nginx.sendfile = false measures h2c")
# A worker (or the cache manager or loader) that died by a signal, in nginx's error log:
# "worker process 123 exited on signal 9". The master forks another at once.
WORKER_DIED = re.compile(r"exited on signal (\d+)")

FASTCGI_PARAMS = """# Rendered by stacklab; the standard CGI/1.1 variables.
fastcgi_param QUERY_STRING $query_string;
fastcgi_param REQUEST_METHOD $request_method;
fastcgi_param CONTENT_TYPE $content_type;
fastcgi_param CONTENT_LENGTH $content_length;
fastcgi_param SCRIPT_NAME $fastcgi_script_name;
fastcgi_param REQUEST_URI $request_uri;
fastcgi_param DOCUMENT_URI $document_uri;
fastcgi_param DOCUMENT_ROOT $document_root;
fastcgi_param SERVER_PROTOCOL $server_protocol;
fastcgi_param REQUEST_SCHEME $scheme;
fastcgi_param HTTPS $https if_not_empty;
fastcgi_param GATEWAY_INTERFACE CGI/1.1;
fastcgi_param SERVER_SOFTWARE nginx/$nginx_version;
fastcgi_param REMOTE_ADDR $remote_addr;
fastcgi_param REMOTE_PORT $remote_port;
fastcgi_param SERVER_ADDR $server_addr;
fastcgi_param SERVER_PORT $server_port;
fastcgi_param SERVER_NAME $server_name;
fastcgi_param REDIRECT_STATUS 200;
"""


class Nginx(userconf.IncludingServer):
    name = "nginx"
    package = "nginx"
    binary = "/usr/sbin/nginx"
    version_args = ("-v",)
    version_pattern = r"nginx/(\S+)"
    knobs = KNOBS
    requests_counter = "requests"

    def inert(self, knobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Knobs that cannot act with these values beyond their own `acts_with`, and why."""
        k, out = knobs[self.name], {}
        if k["keepalive_timeout"] == 0:
            out["nginx.keepalive_requests"] = "acts only with keep-alive on " \
                                              "(nginx.keepalive_timeout > 0)"
        return out | tls_inert(self.name, k)

    def endpoint(self, ctx: RenderContext, knobs: dict[str, Any]) -> Endpoint:
        """Its port; with h2c (http2 on, tls off), also the unix socket of its HTTP/1.1
        listener, which the checks reach (verify.connection) and the load does not."""
        checks = (lab.socket_path(ctx.run_dir, CHECKS_SOCKET, self.name)
                  if h2c_only(knobs) else None)
        return Endpoint(ctx.host, ctx.port, checks,
                        scheme="https" if knobs["tls"] else "http")

    def protocol_problem(self, knobs: dict[str, Any], protocol: str) -> str | None:
        return protocol_problem(self.name, knobs, protocol, h2c_only=True)

    def http1_on_unix_only(self, knobs: dict[str, Any]) -> str | None:
        return "nginx.http2 is on and nginx.tls off (its port takes h2c only)" \
            if h2c_only(knobs) else None

    def known_slow(self, knobs: dict[str, Any], load: dict[str, Any]) -> str | None:
        # an h2c load reaches only a front that speaks it: behind a layer, nginx's h2c
        # port is not used (the layer takes its HTTP/1.1 socket)
        h2c = load.get("protocol") == "h2c"
        return H2C_SENDFILE if h2c and h2c_only(knobs) and knobs.get("sendfile") else None

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        (ctx.run_dir / "tmp").mkdir(exist_ok=True)
        user = self.included(knobs)
        files = {"nginx.conf": render_template(HERE / "nginx.conf.j2", ctx, knobs,
                                               include=user,
                                               included=configtest.INCLUDED,
                                               checks=self.endpoint(ctx, knobs).unix)}
        if knobs["php"] == "fpm":
            files["fastcgi_params"] = FASTCGI_PARAMS
        if user:
            files[configtest.INCLUDED] = user.text
        return files

    def test_run(self, user: userconf.UserFile, ctx: RenderContext,
                 knobs: dict[str, Any]) -> None:
        """`nginx -t` on the run's config."""
        configtest.check_run(user, ctx.run_dir)

    def processes(self, knobs: dict[str, Any]) -> int:
        """The master and its workers (auto: one per core)."""
        return 1 + (knobs["worker_processes"] or (os.cpu_count() or 1))

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        return [self.binary, "-p", str(ctx.run_dir), "-c", str(ctx.run_dir / "nginx.conf"),
                "-e", str(ctx.run_dir / "error.log")]

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        k, ep = started.knobs, started.endpoint
        verdicts = [check_keepalive(self.name, ep, CHECK_PATH, k["keepalive_timeout"] > 0),
                    check_gzip(self.name, ep, CHECK_PATH, k["gzip"] or k["gzip_static"]),
                    check_precompressed(self.name, ep, started.ctx.docroot, CHECK_PATH,
                                        k["gzip_static"]),
                    check_expires(self.name, ep, CHECK_PATH,
                                  self.knob("expires").means[k["expires"]]),
                    self._check_counted(started)]
        if k["tls"]:
            verdicts += check_tls(self.name, ep, k)
        return verdicts + [check_http2(self.name, ep, k["http2"])]

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """stub_status: connections accepted and handled, requests (this one included)."""
        resp = fetch(started.endpoint, STATUS_PATH)
        if resp.status != 200:
            raise OSError(f"{STATUS_PATH}: status {resp.status}")
        return parse_stub_status(resp.body.decode())

    def lost_worker(self, line: str) -> bool:
        return worker_died(line)

    def _check_counted(self, started: RunningComponent) -> Verdict:
        """The counters are the server's: COUNTED requests between two readings are
        COUNTED more in stub_status (plus the second reading, which counts itself)."""
        before = self.counters(started)["requests"]
        for _ in range(COUNTED):
            fetch(started.endpoint, CHECK_PATH)
        counted = self.counters(started)["requests"] - before - 1
        ok = counted == COUNTED
        return Verdict(self.name, "requests counted", Status.PASS if ok else Status.FAIL,
                       f"stub_status counted {counted:g} of {COUNTED} requests",
                       {"sent": COUNTED, "counted": counted})


def h2c_only(knobs: dict[str, Any]) -> bool:
    """nginx 1.22's `listen … http2` without ssl: the port takes cleartext HTTP/2 only
    (knobs stored before the http2 knob existed have neither: HTTP/1.1)."""
    return bool(knobs.get("http2")) and not knobs.get("tls")


def worker_died(line: str) -> bool:
    """Whether a line of nginx's error log says a worker died by a signal (nginx ends its
    workers by QUIT and TERM, which they handle: they exit, not die by it)."""
    return WORKER_DIED.search(line) is not None


def parse_stub_status(text: str) -> dict[str, float]:
    """stub_status's fixed format: its second line names the counters of its third
    (`server accepts handled requests` / ` 7 7 9`); the other lines are levels."""
    lines = text.splitlines()
    names, values = lines[1].split()[1:], lines[2].split()
    if len(names) != len(values):
        raise ValueError(f"unexpected stub_status output {text[:200]!r}")
    return {name: int(value) for name, value in zip(names, values)}
