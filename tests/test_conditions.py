"""Study conditions stacklab could not express before, each on real servers on loopback:
sized workloads, precompressed gzip (nginx gzip_static, Apache via mod_rewrite), Debian's
php.ini, OPcache loaded but off, TLS 1.3 by default, and knobs that act only with others."""

import contextlib
import gzip

import pytest

from stacklab.experiment.plan import make_plan
from stacklab.experiment.spec import parse_spec
from stacklab.run.stack import RunningStack, start_stack, stop_stack, verify_stack
from stacklab.stacks import STACKS
from stacklab.stacks.php.verify import probe
from stacklab.stacks.tls import make_certificate
from stacklab.measure.verify import Status, fetch
from stacklab.workloads import deploy

from helpers import server_processes
from test_stacks import assert_all_pass, knobs_for, run_stack, statuses

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def running(session, stack: str, workload: str, **overrides):
    """A started stack for requests of our own; always stopped, nothing left behind."""
    deployed = deploy(workload, session.run_dir(f"docroot-{workload}"))
    run_dir = session.run_dir(f"run-{len(list(session.dir.iterdir()))}")
    stack_run = RunningStack(STACKS[stack])
    try:
        start_stack(stack_run, knobs_for(stack, **overrides), deployed, run_dir,
                    make_certificate(session.dir), session.run_dir("cache"))
        yield stack_run, deployed
    finally:
        assert stop_stack(stack_run) == []
        assert not any(str(run_dir) in p for p in server_processes())


def verdict(verdicts, component, check):
    return next(v for v in verdicts if (v.component, v.check) == (component, check))


# --- 1. workload sizes -----------------------------------------------------------------

@pytest.mark.parametrize("stack, workload, path, size", [
    ("nginx", "static-page:600", "/index.html", 600),
    ("apache", "portal-page:26k", "/portal.html", 26 * 1024),
    ("nginx+php-fpm", "php-page:680k", "/index.php", None),
    ("nginx+php-fpm", "php-cpu:20000", "/cpu.php", None),
])
def test_sized_workloads_are_served_and_verified_byte_for_byte(session, stack, workload,
                                                               path, size):
    with running(session, stack, workload) as (stack_run, deployed):
        verdicts = verify_stack(stack_run, deployed)
        assert_all_pass(verdicts)
        content = verdict(verdicts, "stack", f"content {path}")
        assert "sha256" in content.detail
        if size:      # (PHP output is pinned against php -n in test_workloads)
            assert content.data["bytes"] == size
            (deployed.docroot / path.lstrip("/")).write_bytes(b"x" * size)
            assert verdict(verify_stack(stack_run, deployed), "stack",
                           f"content {path}").status is Status.FAIL


def test_680k_of_php_code_is_cached_by_opcache(session):
    with running(session, "nginx+php-fpm", "php-page:680k") as (stack_run, _):
        ep = stack_run.front.endpoint
        for _ in range(3):
            fetch(ep, "/index.php")
        assert probe(ep)["opcache_cached_scripts"] >= 2     # index.php and lib.php


# --- 2. precompressed gzip ----------------------------------------------------------

@pytest.mark.parametrize("stack, knob, extra", [
    ("nginx", "nginx__gzip_static", {}),
    ("nginx", "nginx__gzip_static", {"nginx__gzip": True, "nginx__gzip_comp_level": 1}),
    ("apache", "apache__precompressed", {}),
    ("apache", "apache__precompressed", {"apache__deflate": True, "apache__deflate_level": 1}),
])
def test_a_gzip_client_gets_the_precompressed_bytes(session, stack, knob, extra):
    with running(session, stack, "portal-page:26k", **{knob: True}, **extra) as (run, deployed):
        verdicts = verify_stack(run, deployed)
        assert_all_pass(verdicts)
        assert "served as is" in verdict(verdicts, stack, "precompressed").detail
        ep = run.front.endpoint
        asked = fetch(ep, "/portal.html", {"Accept-Encoding": "gzip"})
        original = (deployed.docroot / "portal.html").read_bytes()
        assert asked.headers["content-encoding"] == "gzip"
        assert "accept-encoding" in asked.headers.get("vary", "").lower()
        assert asked.body == (deployed.docroot / "portal.html.gz").read_bytes()
        assert gzip.decompress(asked.body) == original
        assert fetch(ep, "/portal.html").body == original
        assert fetch(ep, "/portal.html").headers.get("content-encoding") is None
        # a .gz that is not the file's compression is caught
        (deployed.docroot / "_stacklab/check.html.gz").write_bytes(gzip.compress(b"other"))
        failed = verdict(verify_stack(run, deployed), stack, "precompressed")
        assert failed.status is Status.FAIL and "decode" in failed.detail


@pytest.mark.parametrize("stack, knobs", [
    ("nginx", {}), ("nginx", {"nginx__gzip": True}),
    # level 9 on the fly once gave the very bytes of a gzip -9 .gz: the copy names its file
    ("nginx", {"nginx__gzip": True, "nginx__gzip_comp_level": 9}),
    ("apache", {}), ("apache", {"apache__deflate": True}),
    ("apache", {"apache__deflate": True, "apache__deflate_level": 9}),
])
def test_without_the_knob_the_gz_copy_is_never_sent(session, stack, knobs):
    verdicts = run_stack(session, stack, "portal-page:26k", **knobs)
    assert_all_pass(verdicts)
    assert "not served" in verdict(verdicts, stack, "precompressed").detail


# --- 3. Debian's php.ini, 4. OPcache loaded but off --------------------------------

DEBIAN = {"session.gc_probability": "0", "session.gc_divisor": "1000",
          "output_buffering": "4096", "memory_limit": "128M", "zend.assertions": "-1",
          "variables_order": "GPCS", "session.sid_length": "26", "expose_php": ""}


@pytest.mark.parametrize("stack", ["nginx+php-fpm", "apache+mod_php", "apache+fcgid"])
def test_running_php_reports_debians_production_values(session, stack):
    with running(session, stack, "php-session") as (run, deployed):
        assert_all_pass(verify_stack(run, deployed))
        ini = probe(run.front.endpoint)["ini"]
        assert {k: ini[k] for k in DEBIAN} == DEBIAN
    ini_file = next(text for name, text in run.files().items() if name.endswith("php.ini"))
    assert "session.gc_probability = 0\n" in ini_file
    assert "session.gc_divisor = 1000\n" in ini_file


def test_session_gc_is_a_knob(session):
    with running(session, "nginx+php-fpm", "php-session",
                 php__session_gc_probability=10) as (run, deployed):
        verdicts = verify_stack(run, deployed)
        assert_all_pass(verdicts)
        assert probe(run.front.endpoint)["ini"]["session.gc_probability"] == "10"
        assert verdict(verdicts, "php", "php.ini").data["session.gc_probability"] == "10"


@pytest.mark.parametrize("stack", ["nginx+php-fpm", "apache+mod_php"])
@pytest.mark.parametrize("opcache, enable, detail, loaded", [
    (True, True, "enabled", True),
    (True, False, "loaded, opcache.enable = 0", True),
    (False, True, "not loaded", False),
])
def test_opcache_loaded_but_off_is_not_opcache_absent(session, stack, opcache, enable, detail,
                                                      loaded):
    with running(session, stack, "php-page", php__opcache=opcache,
                 php__opcache_enable=enable) as (run, deployed):
        verdicts = verify_stack(run, deployed)
        assert_all_pass(verdicts)
        assert verdict(verdicts, "php", "opcache").detail.startswith(detail)
        seen = probe(run.front.endpoint)
        assert (seen["opcache_loaded"], seen["opcache_enabled"]) == (loaded, opcache and enable)


# --- 5. TLS 1.3 unless told otherwise ----------------------------------------------

@pytest.mark.parametrize("stack", ["nginx", "apache"])
@pytest.mark.parametrize("tickets", [True, False])
def test_tls_13_is_negotiated_by_default_and_resumes_by_ticket_or_cache(session, stack,
                                                                         tickets):
    verdicts = run_stack(session, stack, **{f"{stack}__tls": True,
                                            f"{stack}__tls_session_tickets": tickets})
    assert_all_pass(verdicts)
    assert "negotiated TLSv1.3" in verdict(verdicts, stack, "tls protocol").detail
    assert verdict(verdicts, stack, "tls resumption").detail.startswith("session resumed")


# --- 6. knobs that act only with others --------------------------------------------

def plan(spec_args, knobs: dict, **matrix):
    doc = {"experiment": {"name": "c", "repetitions": 1, "requests": 10},
           "knobs": knobs,
           "matrix": {"stack": ["nginx"], "workload": ["static-page"], "concurrency": [1],
                      **matrix}}
    return make_plan(parse_spec(doc, "c.toml", *spec_args), STACKS)


def test_tcp_nopush_applies_where_sendfile_is_on_and_runs_where_it_is_off(session, spec_args):
    planned = plan(spec_args, {"nginx": {"tcp_nopush": True}}, nginx={"sendfile": [True, False]})
    assert len(planned.trials) == 2
    assert planned.notes == ("nginx.tcp_nopush = True cannot act in 1 of 2 trials with nginx "
                             "(acts only with nginx.sendfile on); it is applied where it can",)
    for sendfile in (True, False):
        verdicts = run_stack(session, "nginx", nginx__tcp_nopush=True, nginx__sendfile=sendfile)
        assert_all_pass(verdicts)
        assert statuses(verdicts)["stack:content /index.html"] == "PASS"


def test_run_prints_the_notes_and_refuses_what_cannot_run(tmp_path):
    from typer.testing import CliRunner
    from stacklab.cli import cli
    spec = tmp_path / "c.toml"
    spec.write_text('[experiment]\nremeasure = 0\nname = "c"\nrequests = 10\n[knobs]\nnginx.tcp_nopush = true\n'
                    '[matrix]\nstack = ["nginx"]\nworkload = ["static-page:600", "php-cpu:5"]\n'
                    'concurrency = [1]\nnginx.sendfile = [true, false]\n'
                    'exclude = [{ workload = "php-cpu:5" }]\n')
    result = CliRunner().invoke(cli, ["run", str(spec), "--dry-run", "--db", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    assert "note: nginx.tcp_nopush = True cannot act in 1 of 2 trials" in result.output
    assert "acts only with nginx.sendfile on" in result.output
    assert "static-page:600" in result.output
    spec.write_text(spec.read_text().replace('nginx.sendfile = [true, false]\n', '')
                    .replace('[knobs]\n', '[knobs]\nnginx.sendfile = false\n'))
    result = CliRunner().invoke(cli, ["run", str(spec), "--dry-run", "--db", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "knobs.nginx.tcp_nopush = True: inert in every trial" in result.output


def test_workloads_lists_how_to_give_a_size():
    from typer.testing import CliRunner
    from stacklab.cli import cli
    result = CliRunner().invoke(cli, ["workloads"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    for usage in ("static-page:SIZE", "portal-page:SIZE", "php-page:SIZE", "php-cpu:N"):
        assert usage in result.output
