"""Apache httpd 2.4, started as `apache2 -f <our config> -DFOREGROUND`; never /etc/apache2."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from ...host import lab
from ...host.net import Endpoint
from ...measure.verify import (CHECK_PATH, Status, Verdict, check_expires, check_gzip, check_keepalive,
                       fetch)
from .. import perl, php
from ..base import Capability, RenderContext, RunningComponent
from ..http2 import check_http2, protocol_problem
from ..php import install as php_install
from ..php import php_env, render_php_config
from ..precompressed_verify import check_precompressed
from ..templates import quote, render_template
from ..tlsrules import tls_inert
from ..tlsverify import check_tls
from .. import userconf
from . import configtest
from .configtest import BASE_MODULES, DEBIAN_MODULES
from .knobs import HTTP2_MPM, KNOBS

HERE = Path(__file__).parent
MODULES = "/usr/lib/apache2/modules"
STATUS_PATH = "/_stacklab/server-status"     # mod_status, loopback only
# mod_status's counters in ?auto (with apache.extended_status on; the rest are levels).
STATUS_COUNTERS = ("Total Accesses", "Total kBytes", "Total Duration")
# A child that died by a signal, in httpd's error log (any MPM): "AH00052: child pid 14
# exit signal Segmentation fault (11)". The parent forks another.
CHILD_DIED = re.compile(r"exit signal .*\((\d+)\)")
# What each handler knob makes Apache provide.
# mod_fcgid binds <dir>/<pid>.<n> in its IPC directory: room for the longest pid and n.
FCGID_DIR_MAX = lab.SUN_PATH_MAX - len("/4194304.99999")
# mod_fcgid cuts each FcgidInitialEnv value at this many bytes (its INITENV_VAL_LEN, 128
# with the terminating NUL): PHPRC and PHP_INI_SCAN_DIR must fit.
FCGID_ENV_MAX = 127
PHP_CAPABILITY = {"mod_php": php.APACHE2HANDLER, "fcgid": php.CGI_FCGI, "cgi": php.CGI}
PERL_CAPABILITY = {mode: perl.CAPABILITIES[f"perl:{mode}"]
                   for mode in ("cgi", "registry", "perlrun")}
HTACCESS = b"# stacklab: parsed per request under AllowOverride All\n"

# BASE_MODULES (always needed by our config) and DEBIAN_MODULES (Debian's default
# enabled set) are configtest's: its test of apache.include loads them too.
HANDLER_MODULES = {"none": (), "mod_php": (), "fpm": ("proxy", "proxy_fcgi"),
                   "fcgid": ("fcgid",), "cgi": ("alias", "actions")}
# The MPM name mod_status reports for each knob value (ITK runs on top of prefork).
STATUS_MPM = {"prefork": "prefork", "itk": "prefork", "worker": "worker", "event": "event"}
# StartServers as Debian's mpm_*.conf ship it, for apache.start_servers = 0.
DEBIAN_START_SERVERS = {"prefork": 5, "itk": 5, "worker": 2, "event": 2}


def start_servers(knobs: dict[str, Any]) -> int:
    return knobs["start_servers"] or DEBIAN_START_SERVERS[knobs["mpm"]]


class Apache(userconf.IncludingServer):
    name = "apache"
    package = "apache2"
    binary = "/usr/sbin/apache2"
    version_args = ("-v",)
    version_pattern = r"Apache/(\S+)"
    knobs = KNOBS
    groups = ("php",)
    requests_counter = "Total Accesses"     # with apache.extended_status on

    def versions(self, knobs: dict[str, Any]) -> dict[str, str]:
        """Apache's own, and the PHP its handler runs inside it (mod_php, php-cgi: known
        by their Debian packages; PHP-FPM tells its own)."""
        handler = php_install.handler_versions({knobs["php_handler"]})
        return {**super().versions(knobs), **handler}

    def versions_depend_on(self, knobs: dict[str, Any]) -> tuple:
        return (knobs["php_handler"], *super().versions_depend_on(knobs))

    def check(self, knobs: dict[str, Any]) -> str | None:
        if knobs["php_handler"] != "none" and knobs["perl_handler"] != "none":
            return "one stack runs either PHP or Perl pages, not both"
        if knobs["php_handler"] == "mod_php" and knobs["mpm"] not in ("prefork", "itk"):
            return (f"mod_php runs only under the prefork MPM (or itk on top of it), not "
                    f"apache.mpm = {knobs['mpm']!r}: Debian's PHP is not thread-safe")
        if knobs["http2"] and knobs["mpm"] in ("prefork", "itk"):
            return f"apache.http2 on with apache.mpm = {knobs['mpm']!r}: {HTTP2_MPM}"
        return None

    def starve_cause(self, knobs: dict[str, Any], connections: int) -> str | None:
        """MaxRequestWorkers caps the requests served at once; below it, the MPM starts
        StartServers children (Debian's 5 for prefork/itk, 2 for worker/event) and adds
        more only as it finds its workers busy, a child a second at first: in a run of a
        few seconds the connections past the first workers wait their turn."""
        threads = knobs["mpm"] in ("worker", "event")
        per_child = knobs["threads_per_child"] if threads else 1
        start = knobs["start_servers"] or (2 if threads else 5)
        limit, at_start = knobs["max_request_workers"], start * per_child
        if connections > limit:
            return (f"apache serves at most {limit} requests at once "
                    f"(apache.max_request_workers) for {connections} connections: set it "
                    f"to {connections} or more")
        if connections <= at_start:
            return None
        children = -(-connections // per_child)
        what = (f"{start} children × {per_child} threads = {at_start} workers" if threads
                else f"{at_start} processes")
        return (f"apache's {knobs['mpm']} MPM starts {what} for {connections} connections "
                "and adds workers only as it finds them busy, so in a short run the "
                f"connections past the first {at_start} wait their turn: set "
                f"apache.start_servers = {children} ({children * per_child} workers at "
                "start) or give the run a longer warmup")

    def protocol_problem(self, knobs: dict[str, Any], protocol: str) -> str | None:
        return protocol_problem(self.name, knobs, protocol)

    def capabilities(self, knobs: dict[str, Any]) -> tuple[Capability, ...]:
        """PHP pages with a PHP handler inside Apache (not fpm: PHP-FPM provides those),
        Perl pages with a Perl handler."""
        return tuple(cap for cap in (PHP_CAPABILITY.get(knobs["php_handler"]),
                                     PERL_CAPABILITY.get(knobs["perl_handler"])) if cap)

    def inert(self, knobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Knobs that cannot act with these values beyond their own `acts_with`, and why."""
        return tls_inert(self.name, knobs[self.name])

    def docroot_files(self, docroot: Path, knobs: dict[str, Any]) -> dict[str, bytes]:
        """With AllowOverride All, a .htaccess in every directory: what Apache then reads
        on every request (the cost apache.allow_override measures). A directory that has
        its own (a user's site, an application's `Require all denied`) keeps it: it is
        read all the same, and the stack takes back only what it placed."""
        if knobs["allow_override"] != "all":
            return {}
        return {"/" + str((d / ".htaccess").relative_to(docroot)): HTACCESS
                for d in [docroot, *sorted(p for p in docroot.rglob("*") if p.is_dir())]
                if not (d / ".htaccess").exists()}

    def modules(self, knobs: dict[str, Any]) -> list[str]:
        mods = list(BASE_MODULES)
        if knobs["modules"] == "debian":
            mods += DEBIAN_MODULES
        mods += HANDLER_MODULES[knobs["php_handler"]]
        if "cgi" in (knobs["php_handler"], knobs["perl_handler"]):
            mods.append("cgi" if knobs["mpm"] in ("prefork", "itk") else "cgid")
        if knobs["perl_handler"] in ("registry", "perlrun"):
            mods.append("perl")
        if knobs["deflate"]:
            mods += ("filter", "deflate")
        if knobs["precompressed"]:
            mods += ("rewrite", "headers")
        if knobs["expires"] != "off":
            mods.append("expires")
        if knobs["tls"]:
            mods += ("socache_shmcb", "ssl")
        if knobs["http2"]:
            mods.append("http2")
        if knobs["allow_override"] == "all":
            mods.append("authz_user")   # what the docroot's .htaccess files use
        return list(dict.fromkeys(mods))

    def endpoint(self, ctx: RenderContext, knobs: dict[str, Any]) -> Endpoint:
        return Endpoint(ctx.host, ctx.port, scheme="https" if knobs["tls"] else "http")

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        ctx.run_dir.chmod(0o755)
        sockets = self._sockets(ctx, knobs)
        user = self.included(knobs)
        files = {"httpd.conf": render_template(HERE / "httpd.conf.j2", ctx, knobs,
                                               modules=MODULES,
                                               load_modules=self.modules(knobs),
                                               start_servers=start_servers(knobs),
                                               php_module=php_install.APACHE_MODULE,
                                               php_cgi=php_install.CGI_BINARY,
                                               include=user,
                                               included=configtest.INCLUDED,
                                               **sockets)}
        if user:
            files[configtest.INCLUDED] = user.text
        if knobs["php_handler"] != "none":
            files.update(render_php_config(ctx.run_dir, ctx.groups["php"], ctx.upstreams))
        if knobs["php_handler"] == "fcgid":
            ipc = sockets["fcgid_dir"]                     # bound by the server user
            ipc.mkdir(exist_ok=True)
            if ctx.user:
                shutil.chown(ipc, ctx.user, ctx.group)
        if knobs["php_handler"] == "cgi":
            (ctx.run_dir / "cgi-bin").mkdir(exist_ok=True)
            files["cgi-bin/php-cgi"] = (
                "#!/bin/sh\n# Rendered by stacklab: php-cgi with the run's own php.ini.\n"
                f"PHPRC={quote(ctx.run_dir / 'php.ini', 'sh')} "
                f"PHP_INI_SCAN_DIR={quote(ctx.run_dir / 'conf.d', 'sh')} "
                f"exec {php_install.CGI_BINARY}\n")
        return files

    def test_run(self, user: userconf.UserFile, ctx: RenderContext,
                 knobs: dict[str, Any]) -> None:
        """`apache2 -t` on the run's config (its MPM, its handler's modules)."""
        configtest.check_run(user, ctx.run_dir, self.env(ctx, knobs))

    def _sockets(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, Path | None]:
        """mod_cgid's socket and mod_fcgid's socket directory, where lab.socket_path puts
        them (a long run directory's are elsewhere), and the php.ini and conf.d mod_fcgid
        gives PHP, within its 127 bytes (lab.short_path); None for a module not loaded."""
        mods = self.modules(knobs)
        return {"cgid_sock": (lab.socket_path(ctx.run_dir, "cgid.sock", self.name)
                              if "cgid" in mods else None),
                "fcgid_dir": (lab.socket_path(ctx.run_dir, "fcgid", self.name, FCGID_DIR_MAX)
                              if "fcgid" in mods else None),
                **({"fcgid_phprc": lab.short_path(ctx.run_dir, "php.ini", self.name,
                                                  FCGID_ENV_MAX),
                    "fcgid_scan_dir": lab.short_path(ctx.run_dir, "conf.d", self.name,
                                                     FCGID_ENV_MAX)}
                   if "fcgid" in mods else {})}

    def processes(self, knobs: dict[str, Any]) -> int:
        """The parent and StartServers children (capped, as Apache caps them, by what
        MaxRequestWorkers allows)."""
        if knobs["mpm"] in ("prefork", "itk"):
            children = knobs["max_request_workers"]
        else:
            children = -(-knobs["max_request_workers"] // knobs["threads_per_child"])
        return 1 + min(start_servers(knobs), children)

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        return [self.binary, "-f", str(ctx.run_dir / "httpd.conf"), "-DFOREGROUND"]

    def env(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str] | None:
        return php_env(ctx.run_dir) if knobs["php_handler"] == "mod_php" else None

    def verify(self, started: RunningComponent, front: RunningComponent) -> list[Verdict]:
        k, ep = started.knobs, started.endpoint
        verdicts = [check_keepalive(self.name, ep, CHECK_PATH, k["keepalive"]),
                    check_gzip(self.name, ep, CHECK_PATH, k["deflate"] or k["precompressed"]),
                    check_precompressed(self.name, ep, started.ctx.docroot, CHECK_PATH,
                                        k["precompressed"]),
                    check_expires(self.name, ep, CHECK_PATH,
                                  self.knob("expires").means[k["expires"]]),
                    self._check_mpm(ep, k["mpm"])]
        if k["tls"]:
            verdicts += check_tls(self.name, ep, k)
        return verdicts + [check_http2(self.name, ep, k["http2"])]

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """mod_status's ?auto: requests, kB and ms served ({} with ExtendedStatus Off,
        where mod_status counts nothing)."""
        fields = server_status(started.endpoint)
        return {name: number(fields[name]) for name in STATUS_COUNTERS if name in fields}

    def lost_worker(self, line: str) -> bool:
        return child_died(line)

    def _check_mpm(self, ep: Endpoint, mpm: str) -> Verdict:
        fields = server_status(ep)
        running, want = fields.get("ServerMPM"), STATUS_MPM[mpm]
        itk = "mpm-itk/" in fields.get("ServerVersion", "")   # ITK announces itself there
        ok = running == want and itk == (mpm == "itk")
        seen = f"server reports MPM {running}" + (" with mpm-itk" if itk else "")
        return Verdict(self.name, "mpm", Status.PASS if ok else Status.FAIL,
                       seen + ("" if ok else f", expected {mpm}"))


def child_died(line: str) -> bool:
    """Whether a line of httpd's error log says a child died by a signal (httpd stops
    and recycles its children by telling them, not by a signal they die of)."""
    return CHILD_DIED.search(line) is not None


def server_status(ep: Endpoint) -> dict[str, str]:
    """mod_status's machine-readable form (?auto): `Name: value` lines."""
    resp = fetch(ep, STATUS_PATH + "?auto")
    if resp.status != 200:
        raise OSError(f"{STATUS_PATH}: status {resp.status}")
    return dict(line.split(": ", 1) for line in resp.body.decode().splitlines() if ": " in line)


def number(text: str) -> float:
    """A status field as a number: an int when it is one."""
    value = float(text)
    return int(value) if value.is_integer() else value
