"""Issue 24, "a server you already run": `[external]` names a server stacklab did not
start; stacklab measures it as it measures its own stacks (verified first, monitored where
watched, stored) and never starts, stops or signals it. A remote url needs the user's
--allow-remote on the command line; bad values are refused with one line naming the key.

The integration tests start a real nginx themselves, from their own small config in
tmp_path (as a user runs theirs), and stop it at the end: stacklab must leave it running.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
import os
import pwd
import signal
import socket
import sqlite3
import subprocess
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.experiment.plan import make_plan
from stacklab.experiment.spec import parse_spec
from stacklab.run.runner import observed, unobserved
from stacklab.stacks import COMPONENTS, STACKS
from stacklab.stacks.base import RunningComponent
from stacklab.host.net import free_port
from stacklab.measure.drive import LOAD_KNOBS, LoadPlan, engine_argv
from stacklab.measure.verify import Status
from stacklab.store import Outcome, RunRecord, Store
from stacklab.stacks.external.target import is_remote, origin, remote_problem
from stacklab.stacks.external.watch import Watched

from helpers import require_engine, wait_for

NGINX = "/usr/sbin/nginx"
REMOTE = "http://192.0.2.10:8080/"      # TEST-NET-1: never reached (only refused or planned)

SPEC = """
[experiment]
name = "{name}"
repetitions = 1
requests = {requests}
warmup = "0s"
remeasure = 0
keep_cpus_awake = false

[external]
url = "{url}"
{external}

[matrix]
concurrency = [2]
{matrix}
"""


def write_spec(tmp_path: Path, url: str, external: str = "", matrix: str = "",
               name: str = "ext", requests: int = 2000, extra: str = "") -> Path:
    spec = tmp_path / f"{name}.toml"
    spec.write_text(SPEC.format(name=name, url=url, external=external, matrix=matrix,
                                requests=requests) + extra)
    return spec


def invoke(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


NGINX_CONF = """daemon off;
{user}worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {root}/tmp-body;
  proxy_temp_path {root}/tmp-proxy;
  fastcgi_temp_path {root}/tmp-fastcgi;
  uwsgi_temp_path {root}/tmp-uwsgi;
  scgi_temp_path {root}/tmp-scgi;
  server {{ listen 127.0.0.1:{port}; root {root}/www; }}
}}
"""


@contextmanager
def own_nginx(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """A real nginx the test starts itself, as a user starts theirs (stacklab knows
    nothing of it): its own session and process group, a static site of two files;
    stopped at the end."""
    root, port = tmp_path / "own-nginx", free_port()
    (root / "www").mkdir(parents=True)
    (root / "www" / "index.html").write_text("<h1>mine</h1>\n")
    (root / "www" / "about.html").write_text("about " * 200)
    # as root, its workers would drop to nobody, who cannot read a private tmp_path
    user = f"user {pwd.getpwuid(os.getuid()).pw_name};\n" if os.getuid() == 0 else ""
    (root / "nginx.conf").write_text(NGINX_CONF.format(root=root, port=port, user=user))
    proc = subprocess.Popen([NGINX, "-c", str(root / "nginx.conf"), "-p", str(root)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: _answers(port), 10, "the test's own nginx answering")
        yield proc, f"http://127.0.0.1:{port}/"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


@pytest.fixture
def nginx(tmp_path):
    with own_nginx(tmp_path) as started:
        yield started


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


def stored_run(db: Path) -> RunRecord:
    """The one run the experiment stored, as the store gives it back."""
    store = Store.open(db)
    try:
        exp = store.experiment("ext")
        run, = store.runs(exp.id)
        return run
    finally:
        store.close()


# --- the target rule -------------------------------------------------------------------

def test_a_remote_url_is_refused_without_the_flag_before_anything_runs(tmp_path):
    spec, db = write_spec(tmp_path, REMOTE), tmp_path / "r.db"
    for args in ((), ("--dry-run",)):
        code, line = invoke("run", spec, "--db", db, *args)
        assert code == 2, line
        assert "external.url" in line and "--allow-remote" in line and "192.0.2.10" in line
    assert not db.exists()


def test_with_the_flag_a_remote_url_is_planned_and_the_engine_told(tmp_path):
    """Planned only: no load is sent off the machine by a test."""
    spec = write_spec(tmp_path, REMOTE)
    code, line = invoke("run", spec, "--db", tmp_path / "r.db", "--dry-run", "--allow-remote")
    assert code == 0, line
    assert remote_problem(REMOTE, allow_remote=True) is None
    load = {k.name: k.default for k in LOAD_KNOBS}
    plan = LoadPlan(((REMOTE + "about.html", 1),), 2, None, 100, 0.0, load)
    assert "--allow-remote" not in engine_argv(plan, tmp_path / "urls")
    assert "--allow-remote" in engine_argv(
        LoadPlan(**{**plan.__dict__, "allow_remote": True}), tmp_path / "urls")


@pytest.mark.parametrize("host, remote", [("127.0.0.1", False), ("127.3.4.5", False),
                                          ("localhost", False), ("192.0.2.10", True)])
def test_loopback_is_local_and_anything_else_remote(host, remote):
    assert is_remote(host) is remote


def test_the_flag_is_the_command_lines_only(tmp_path):
    """An experiment file cannot allow a remote target: there is no such key."""
    spec = write_spec(tmp_path, REMOTE, external="allow_remote = true")
    code, line = invoke("run", spec, "--db", tmp_path / "r.db", "--dry-run")
    assert code == 2 and "external.allow_remote" in line and "unknown key" in line


# --- bad values: one line naming the key ------------------------------------------------

BAD = [
    ('paths = ["about.html"]', "external.paths[0]", "does not start with '/'"),
    ("paths = []", "external.paths", "at least one path"),
    ('paths = ["/", "/"]', "external.paths", "repeat"),
    ('paths = ["/a", "/b"]\nweights = [1]', "external.weights", "one weight per path"),
    ('paths = ["/a"]\nweights = [0]', "external.weights[0]", "1..1000000"),
    ('watch = { pid = "x" }', "external.watch.pid", "an integer"),
    ("watch = { pid = 1 }", "external.watch", "above 1"),
    ('watch = { pid = 5, unit = "a.service" }', "external.watch", "one of"),
    ("watch = { port = 80 }", "external.watch.port", "unknown kind"),
    ('watch = { unit = "my nginx" }', "external.watch", "not a systemd unit"),
    ('watch = { cgroup = "/tmp/x" }', "external.watch", "/sys/fs/cgroup/"),
    ("colour = 3", "external.colour", "unknown key"),
]


@pytest.mark.parametrize("external, key, why", BAD, ids=[b[1] + ":" + b[0] for b in BAD])
def test_a_bad_value_is_refused_naming_its_key(tmp_path, external, key, why):
    spec = write_spec(tmp_path, "http://127.0.0.1:8080/", external=external)
    code, line = invoke("run", spec, "--db", tmp_path / "r.db", "--dry-run")
    assert code == 2, line
    assert f"{key} " in line or f"{key}:" in line or f"{key} =" in line, line
    assert why in line and "Traceback" not in line


@pytest.mark.parametrize("url, why", [
    ("ftp://127.0.0.1/", "expected http://host:port/"),
    ("http://127.0.0.1:8080/app/", "the origin only"),
    ("http://127.0.0.1:99999/", "port"),
    ("http://user@127.0.0.1/", "user information"),
    ("http://[::1]:8080/", "IPv6"),
])
def test_a_bad_url_is_refused_naming_external_url(tmp_path, url, why):
    code, line = invoke("run", write_spec(tmp_path, url), "--db", tmp_path / "r.db",
                        "--dry-run")
    assert code == 2 and "external.url" in line and why in line, line


@pytest.mark.parametrize("extra, key", [
    ("", "external.url"),                                     # url given below, then cut
    ('[knobs.net]\nrtt_ms = 5\n', "knobs.net.rtt_ms"),
    ('[knobs.nginx]\nsendfile = false\n', "knobs.nginx.sendfile"),
])
def test_what_cannot_act_on_a_server_stacklab_did_not_start_is_refused(tmp_path, extra, key):
    spec = write_spec(tmp_path, "http://127.0.0.1:8080/", extra=extra)
    if not extra:
        spec.write_text(spec.read_text().replace('url = "http://127.0.0.1:8080/"', ""))
    code, line = invoke("run", spec, "--db", tmp_path / "r.db", "--dry-run")
    assert code == 2 and key in line, line


def test_the_stack_is_the_server_itself(tmp_path):
    spec = write_spec(tmp_path, "http://127.0.0.1:8080/", matrix='stack = ["nginx"]')
    code, line = invoke("run", spec, "--db", tmp_path / "r.db", "--dry-run")
    assert code == 2 and "matrix.stack" in line, line
    bare = tmp_path / "bare.toml"
    bare.write_text('[experiment]\nname = "b"\nduration = "1s"\n[matrix]\nstack = '
                    '["external"]\nworkload = ["static-page"]\nconcurrency = [1]\n')
    code, line = invoke("run", bare, "--db", tmp_path / "r.db", "--dry-run")
    assert code == 2 and "matrix.stack" in line and "[external]" in line, line


def test_only_a_server_stacklab_did_not_start_counts_its_own_cpu(tmp_path):
    """Component.cpu_counter: a component stacklab starts is counted by the monitor in its
    own process group (None); the external one by the cgroup it watches."""
    cgroup = tmp_path / "group"
    cgroup.mkdir()
    (cgroup / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    proc = Watched("external", f"cgroup:{cgroup}", cgroup=cgroup)
    started = RunningComponent("external", None, proc, {}, None)  # type: ignore[arg-type]
    assert COMPONENTS["external"].cpu_counter(started)() == 2.5
    assert COMPONENTS["nginx"].cpu_counter(started) is None
    unwatched = replace(started, proc=Watched("external", ""))
    assert COMPONENTS["external"].cpu_counter(unwatched)() is None


def test_origin_is_parsed_once():
    assert origin("http://localhost:8080/").base_url == "http://localhost:8080"
    assert origin("https://127.0.0.1/").port == 443


def test_what_is_watched_is_not_part_of_a_trials_definition(tmp_path, spec_args):
    """A server restarted under a new pid is the same trial (--resume, compare): the
    watch is applied to each run and recorded with it, outside the trial's id."""
    def planned(pid: int):
        doc = tomllib.loads(write_spec(tmp_path, "http://127.0.0.1:8080/",
                                       external=f"watch = {{ pid = {pid} }}").read_text())
        spec = parse_spec(doc, "ext.toml", *spec_args)
        return spec, make_plan(spec, STACKS)
    (a, plan_a), (b, plan_b) = planned(1234), planned(5678)
    assert [t.id for t in plan_a.trials] == [t.id for t in plan_b.trials]
    assert "pid" not in plan_a.trials[0].label()
    assert a.observe == {"external.watch": "pid:1234"} and b.observe != a.observe
    knobs = {"external": {"url": "u", "watch": ""}, "load": {"rate": 0}}
    assert observed(knobs, a.observe)["external"]["watch"] == "pid:1234"
    assert unobserved(observed(knobs, a.observe), a.observe) == {
        "external": {"url": "u"}, "load": {"rate": 0}}


# --- verification before measuring ------------------------------------------------------

@pytest.mark.integration
def test_a_path_that_404s_fails_before_anything_is_measured(tmp_path, nginx):
    proc, url = nginx
    spec = write_spec(tmp_path, url, external='paths = ["/", "/missing.html"]')
    db = tmp_path / "r.db"
    code, line = invoke("run", spec, "--db", db)
    assert code != 0, line
    assert f"GET {url}missing.html answered 404" in line and "not measured" in line, line
    assert not db.exists()
    assert proc.poll() is None            # the user's server is left running


def test_connection_refused_names_the_url(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/"
    code, line = invoke("run", write_spec(tmp_path, url), "--db", tmp_path / "r.db")
    assert code != 0 and f"GET {url}: connection refused" in line, line


# --- a real measurement of a server started outside stacklab ---------------------------

@pytest.mark.integration
def test_a_server_started_outside_stacklab_is_measured_with_its_cpu(tmp_path, nginx):
    """watch = { pid = … }: the server's process group is sampled like a component's;
    the run is stored with what was watched and the server's own Server header, no
    version claimed; --allow-remote reaches the engine (its report says so) though the
    target is loopback; nginx is running afterwards, as it was."""
    require_engine()
    proc, url = nginx
    spec = write_spec(tmp_path, url, external=f'paths = ["/", "/about.html"]\n'
                      f'weights = [3, 1]\nwatch = {{ pid = {proc.pid} }}')
    db = tmp_path / "r.db"
    code, line = invoke("run", spec, "--db", db, "--allow-remote")
    assert code == 0, line
    run = stored_run(db)
    assert run.outcome is Outcome.OK, run.reason
    assert run.resources.figure("external", "cpu_s") > 0
    assert run.resources.figure("external", "processes_max") >= 2      # master, worker
    target = json.loads(run.configs["external/external.json"])
    assert target["server_header"].startswith("nginx") and target["pid"] == proc.pid
    assert target["remote"] is False
    assert "external" not in run.versions
    assert run.load.raw["config"]["allow_remote"] is True
    verdicts = {v.check: v for v in run.verdicts}
    assert {"content /", "content /about.html", "target"} <= set(verdicts)
    assert "watch" not in verdicts
    assert proc.poll() is None


@pytest.mark.integration
def test_with_nothing_watched_the_servers_figures_are_not_known(tmp_path, nginx):
    require_engine()
    proc, url = nginx
    db = tmp_path / "r.db"
    code, line = invoke("run", write_spec(tmp_path, url, requests=300), "--db", db)
    assert code == 0, line
    run = stored_run(db)
    assert run.outcome is Outcome.OK, run.reason
    assert "external" not in run.resources.components     # unknown, not zero
    watch = next(v for v in run.verdicts if v.check == "watch")
    assert watch.status is Status.WARN and "not known" in watch.detail
    assert proc.poll() is None


@pytest.fixture
def own_cgroup(tmp_path):
    """A cgroup of the test's own where the kernel counts CPU (v1's cpuacct hierarchy, or
    v2's unified tree), removed at the end; skipped where this machine gives none."""
    from stacklab.netlab.cgroupmounts import detect
    found = detect()
    hierarchy = found.get("cpuacct") or next(
        (h for h in found.values() if h.version == 2), None)
    if hierarchy is None:
        pytest.skip("no cgroup hierarchy that counts CPU here")
    group = hierarchy.mount / f"stacklab-test-external-{os.getpid()}"
    try:
        group.mkdir()
    except OSError as e:
        pytest.skip(f"cannot make a cgroup here: {e}")
    yield group
    wait_for(lambda: not (group / "cgroup.procs").read_text().split(), 10,
             "the test's cgroup emptied once its nginx stopped")
    group.rmdir()


@pytest.mark.integration
def test_a_watched_cgroup_gives_its_cpu_time(tmp_path, own_cgroup):
    """watch = { cgroup = … }: the CPU the kernel charged to the group is the server's
    (cpu_source "cgroup"), as for a component in a group of its own."""
    require_engine()
    with own_nginx(tmp_path) as (proc, url):
        for pid in filter(str.isdigit, os.listdir("/proc")):      # its master and worker
            try:
                if os.getpgid(int(pid)) == proc.pid:
                    (own_cgroup / "cgroup.procs").write_text(pid)
            except (ProcessLookupError, PermissionError):
                continue
        db = tmp_path / "r.db"
        spec = write_spec(tmp_path, url, external=f'watch = {{ cgroup = "{own_cgroup}" }}')
        code, line = invoke("run", spec, "--db", db)
        assert code == 0, line
        run = stored_run(db)
        assert run.outcome is Outcome.OK, run.reason
        assert run.resources.figure("external", "cpu_source") == "cgroup"
        assert run.resources.figure("external", "cpu_s") > 0
        assert proc.poll() is None


@pytest.mark.parametrize("url", ["http://stacklab-test.invalid:8080/",
                                 "http://127.0.0.1.nip.io:8080/"])
def test_a_name_is_refused_without_a_lookup_unless_the_flag(tmp_path, monkeypatch, url):
    """Loopback is decided on the literal, as the engine decides it: without
    --allow-remote a name other than localhost is refused before the resolver is asked
    (a lookup leaves the machine; DNS may say loopback now and another host later)."""
    looked_up = []
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo",
                        lambda host, *a, **k: looked_up.append(host) or real(host, *a, **k))
    spec, db = write_spec(tmp_path, url), tmp_path / "r.db"
    for args in ((), ("--dry-run",)):
        code, line = invoke("run", spec, "--db", db, *args)
        assert code == 2, line
        assert "external.url" in line and "is a name" in line and "--allow-remote" in line
    assert looked_up == []
    assert remote_problem("http://localhost:8080/", allow_remote=False) is None
    assert looked_up == ["localhost"]           # /etc/hosts' name only


def test_a_huge_url_is_said_by_its_start_and_its_length(tmp_path):
    """A 200 KB path's error was printed and stored whole."""
    path = "/" + "a" * 200_000
    spec = write_spec(tmp_path, "http://127.0.0.1:1/", external=f'paths = ["{path}"]')
    db = tmp_path / "r.db"
    code, line = invoke("run", spec, "--db", db)
    assert code != 0 and len(line) < 2_000, line[:300]
    assert f"http://127.0.0.1:1/{'a' * 100}" in line and "(200,020 characters)" in line
    stored = sqlite3.connect(db).execute("SELECT * FROM runs").fetchall() if db.exists() else []
    assert all(len(repr(row)) < 20_000 for row in stored)
