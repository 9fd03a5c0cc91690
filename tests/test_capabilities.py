"""Components declare what they provide (capabilities, each with its probe and verifier),
which upstream they talk to and what they count; knobs declare when they act, what their
values mean and what they cost; workloads declare what they need. Generic code names none
of them. Unit tables first, then the counters and probes of real servers on loopback."""

import re
from pathlib import Path

import pytest

from stacklab.analysis import recommend
from stacklab.errors import StackError
from stacklab.host.net import Endpoint
from stacklab.run.stack import (RunningStack, counters_delta, stack_counters, start_stack,
                            stop_stack, verify_stack)
from stacklab.stacks import COMPONENTS, REGISTRY, STACKS, needs_problem
from stacklab.stacks.apache.adapter import number
from stacklab.stacks.base import RenderContext, Upstream, satisfies
from stacklab.stacks.nginx.adapter import parse_stub_status
from stacklab.stacks.php.install import find_version
from stacklab.stacks.tls import make_certificate
from stacklab.measure.verify import Status, fetch
from stacklab.workloads import WORKLOADS, deploy

from helpers import ROOT, tamper
from test_stacks import assert_all_pass, knobs_for, run_stack

# --- what each stack provides, from its components and the knobs it fixes -------------

PROVIDES = {
    "nginx": (), "apache": (), "lighttpd": (), "mini-httpd": (), "webfs": (),
    "nginx+php-fpm": ("php:fpm-fcgi",), "apache+php-fpm": ("php:fpm-fcgi",),
    "lighttpd+php-fpm": ("php:fpm-fcgi",), "apache+mod_php": ("php:apache2handler",),
    "apache+fcgid": ("php:cgi-fcgi",), "apache+cgi": ("php:cgi",),
    "apache+perl-cgi": ("perl:cgi",), "apache+mod_perl": ("perl:registry",),
    "apache+mod_perl-perlrun": ("perl:perlrun",),
    "nginx+php-fpm+mariadb": ("php:fpm-fcgi", "database:mysql"),
    "apache+mod_php+mariadb": ("php:apache2handler", "database:mysql"),
    "apache+php-fpm+mariadb": ("php:fpm-fcgi", "database:mysql"),
    "apache+fcgid+mariadb": ("php:cgi-fcgi", "database:mysql"),
    "apache+cgi+mariadb": ("php:cgi", "database:mysql"),
    "lighttpd+php-fpm+mariadb": ("php:fpm-fcgi", "database:mysql"),
    "nginx+php-fpm+memcached": ("php:fpm-fcgi", "sessions:memcached"),
    "external": (),        # a server the user runs: what it provides is not known
}


def test_every_stack_provides_what_its_components_say():
    assert {name: s.provides for name, s in STACKS.items()} == PROVIDES


def test_the_php_knob_group_applies_where_php_runs():
    assert {name for name, s in STACKS.items() if "php" in s.groups} == {
        name for name, provided in PROVIDES.items() if satisfies(provided, "php")}


@pytest.mark.parametrize("provided, need, met", [
    (("php:fpm-fcgi",), "php", True), (("php:fpm-fcgi",), "php:fpm-fcgi", True),
    (("php:fpm-fcgi",), "php:apache2handler", False), (("perl:cgi",), "php", False),
    (("php:cgi", "database:mysql"), "database:mysql", True), ((), "php", False),
])
def test_a_need_is_a_capability_or_its_kind(provided, need, met):
    assert satisfies(provided, need) is met


def test_every_workload_can_be_served_by_some_stack_and_says_why_not_elsewhere():
    for w in WORKLOADS.values():
        assert any(not s.unmet(w.needs) for s in STACKS.values()), w.name
    assert needs_problem("nginx+php-fpm+mariadb", WORKLOADS["app-show"].needs) is None
    assert needs_problem("nginx+php-fpm", WORKLOADS["app-show"].needs) == (
        "needs database:mysql, which stack 'nginx+php-fpm' does not provide (stacks that "
        "do: nginx+php-fpm+mariadb, apache+mod_php+mariadb, apache+php-fpm+mariadb, "
        "apache+fcgid+mariadb, apache+cgi+mariadb, lighttpd+php-fpm+mariadb)")
    assert needs_problem("nginx", WORKLOADS["perl-page"].needs).startswith(
        "needs perl, which stack 'nginx' does not provide (stacks that do: apache+perl-cgi")


def test_a_component_finds_its_upstream_by_what_it_provides():
    fpm, db = Endpoint("127.0.0.1", 9000), Endpoint("127.0.0.1", 1, Path("/run/db.sock"))
    ctx = RenderContext(Path("/r"), Path("/d"), "127.0.0.1", 80, None, None,
                        (Upstream("mariadb", db, ("database:mysql",)),
                         Upstream("php-fpm", fpm, ("php:fpm-fcgi",))))
    assert ctx.upstream("php") == fpm and ctx.upstream("database:mysql") == db
    with pytest.raises(StackError, match=r"no upstream provides http \(started behind: "
                       r"mariadb \(database:mysql\), php-fpm \(php:fpm-fcgi\)\)"):
        ctx.upstream("http")


GENERIC = ["stacklab/run/stack.py", "stacklab/experiment/plan.py", "stacklab/methods/breakdown.py",
           "stacklab/stacks/base.py", "stacklab/run/runner.py", "stacklab/commands/run.py",
           "stacklab/run/layers.py", "stacklab/run/validate.py", "stacklab/netlab/layers.py"]
# The run's compositions name no server or runtime either: each component reports its
# own versions (Component.versions), so none asks after Apache's PHP handler.
COMPOSITIONS = ["stacklab/run/runner.py", "stacklab/methods/breakdown.py", "stacklab/run/layers.py"]
# A database's product and client library, and a server's error-log wording (which lines
# mean a lost worker): the component's own to say.
GENERIC += ["stacklab/run/measurement.py", "stacklab/methods/dbbench.py", "stacklab/cli.py"]


@pytest.mark.parametrize("path", GENERIC)
def test_generic_code_names_no_component(path):
    text = (ROOT / path).read_text()
    named = re.findall(r"php-fpm|php_fpm|mariadb|memcached|mod_php|php_sapi|\.perl\b"
                       r"|(?i:mariadb|pymysql)|exited on signal|exit signal|AH\d{5}", text)
    assert not named, f"{path} names {sorted(set(named))}"


@pytest.mark.parametrize("path", COMPOSITIONS)
def test_a_composition_names_no_server_or_runtime(path):
    text = (ROOT / path).read_text()
    named = re.findall(r"php_handler|handler_versions|apache", text)
    assert not named, f"{path} names {sorted(set(named))}"


def test_templates_take_their_upstream_by_capability_and_php_by_its_found_version():
    stacks = ROOT / "stacklab" / "stacks"
    for template in stacks.rglob("*.j2"):
        text = template.read_text()
        assert "upstreams[" not in text, template
        assert not re.search(r"\d\.\d\.so|php-cgi\d|php-fpm\d", text), template
    for adapter in stacks.rglob("adapter.py"):
        assert not re.search(r"php-?(fpm|cgi)?\d\.\d", adapter.read_text()), adapter


def test_the_php_version_is_found_from_the_alternative_or_the_fpm_installed(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "sbin").mkdir()
    (tmp_path / "bin/php8.3").touch()
    (tmp_path / "bin/php").symlink_to(tmp_path / "bin/php8.3")
    assert find_version(tmp_path / "bin/php", tmp_path / "sbin") == "8.3"
    for version in ("8.2", "8.10", "7.4"):
        (tmp_path / f"sbin/php-fpm{version}").touch()
    assert find_version(tmp_path / "none", tmp_path / "sbin") == "8.10"
    assert find_version(tmp_path / "none", tmp_path / "empty") == "8.2"


# --- knob knowledge lives on the knob ----------------------------------------------------

@pytest.mark.parametrize("key, inert, acting, why", [
    ("nginx.tcp_nopush", {"sendfile": False}, {"sendfile": True},
     "acts only with nginx.sendfile on"),
    ("nginx.tls_session_tickets", {"tls": False}, {"tls": True}, "acts only with nginx.tls on"),
    ("php-fpm.start_servers", {"pm": "static"}, {"pm": "dynamic"},
     "acts only with php-fpm.pm = 'dynamic', not 'static'"),
    ("apache.min_spare_servers", {"mpm": "event"}, {"mpm": "itk"},
     "acts only under the prefork or itk MPM, not apache.mpm = 'event'"),
    ("apache.threads_per_child", {"mpm": "itk"}, {"mpm": "worker"},
     "acts only under the worker or event MPM, not apache.mpm = 'itk'"),
    ("php.opcache_memory_mb", {"opcache_enable": False}, {},
     "acts only with OPcache on (php.opcache and php.opcache_enable true)"),
    ("php.session_gc_probability", {"session_handler": "memcached"}, {},
     "memcached expires sessions itself (php.session_handler = 'memcached')"),
])
def test_a_knob_says_which_values_of_its_owner_it_acts_with(key, inert, acting, why):
    owner = key.split(".", 1)[0]
    assert REGISTRY.inert({owner: {**REGISTRY.defaults(owner), **inert}})[key] == why
    assert key not in REGISTRY.inert({owner: {**REGISTRY.defaults(owner), **acting}})


def test_nginx_serves_files_the_way_debian_ships_it():
    """Debian 12's /etc/nginx/nginx.conf: `sendfile on; tcp_nopush on;`. With sendfile off
    (the old default here) nginx copied S1's ~323 KB photos through 32 KB buffers and
    served them at 0.64x Apache's rate; as Debian ships it, at 1.5x."""
    defaults = REGISTRY.defaults("nginx")
    assert (defaults["sendfile"], defaults["tcp_nopush"]) == (True, True)
    assert "nginx.tcp_nopush" not in REGISTRY.inert({"nginx": defaults})


def test_every_component_has_an_inert_rule_even_if_it_has_none():
    knobs = {name: REGISTRY.defaults(name) for name in COMPONENTS}
    assert all(isinstance(c.inert(knobs), dict) for c in COMPONENTS.values())


def test_cautions_and_expiry_seconds_are_declared_on_the_knobs():
    assert recommend.CAUTIONS == {k.key: k.caution for k in REGISTRY.knobs.values()
                                  if k.caution}
    assert set(recommend.CAUTIONS) == {"php.session_auto_start", "apache.hostname_lookups",
                                       "apache.allow_override",
                                       "php.opcache_validate_timestamps",
                                       "varnish.honour_cache_control",
                                       "varnish.honour_cookies"}
    for name in ("nginx", "apache"):
        knob = COMPONENTS[name].knob("expires")
        assert knob.means == {"off": None, "1h": 3600, "1d": 86400, "30d": 2_592_000}
        assert knob.choices == tuple(knob.means)


def test_nofile_is_one_declaration():
    declared = [k for k in REGISTRY.knobs.values() if k.name == "nofile"]
    assert {k.component for k in declared} == {"nginx", "apache", "lighttpd", "apache-proxy"}
    assert {(k.type, k.default, k.min, k.max) for k in declared} == {(int, 0, 0, 1_048_576)}


# --- counters: parsers ---------------------------------------------------------------

def test_stub_status_counters_are_its_third_line_named_by_its_second():
    text = ("Active connections: 2 \nserver accepts handled requests\n 7 7 19 \n"
            "Reading: 0 Writing: 1 Waiting: 1 \n")
    assert parse_stub_status(text) == {"accepts": 7, "handled": 7, "requests": 19}


def test_a_status_field_is_an_int_when_it_is_one():
    assert number("1234") == 1234 and isinstance(number("12"), int) and number("1.5") == 1.5


def test_the_delta_is_per_component_and_counter_read_both_times():
    before = {"nginx": {"requests": 10, "accepts": 2}, "gone": {"x": 1}}
    after = {"nginx": {"requests": 35, "accepts": 3, "new": 9}}
    assert counters_delta(before, after) == {"nginx": {"requests": 25, "accepts": 1}}


# --- real servers: counters, probes placed and taken back, a verifier on counters ----------

@pytest.mark.integration
@pytest.mark.parametrize("stack, workload, knobs, counted", [
    ("nginx+php-fpm+mariadb", "app-show", {},
     {"nginx": "requests", "php-fpm": "accepted conn", "mariadb": "Com_select"}),
    ("nginx+php-fpm", "php-page", {"php-fpm__listen": "tcp"},
     {"nginx": "requests", "php-fpm": "accepted conn"}),
    ("apache", "static-page", {"apache__extended_status": True},
     {"apache": "Total Accesses"}),
    ("nginx+php-fpm+memcached", "php-session", {}, {"memcached": "cmd_set"}),
])
def test_each_component_counts_from_its_own_status_source(session, stack, workload, knobs,
                                                          counted):
    from dataclasses import replace

    from stacklab.workloads.appdata import AppDatabase
    deployed = deploy(workload, session.run_dir(f"docroot-{workload}"))
    if deployed.database is not None:
        deployed = replace(deployed, database=AppDatabase(5, articles=300))
    running = RunningStack(STACKS[stack])
    path = deployed.urls[0][0]
    try:
        start_stack(running, knobs_for(stack, **knobs), deployed, session.run_dir("run"),
                    make_certificate(session.dir), session.run_dir("cache"))
        before = stack_counters(running)
        for _ in range(5):
            assert fetch(running.front.endpoint, path).status == 200
        delta = counters_delta(before, stack_counters(running))
    finally:
        assert stop_stack(running) == []
    for component, counter in counted.items():
        assert delta[component][counter] >= 5, delta
    if "nginx" in counted:      # the second reading counts itself
        assert delta["nginx"]["requests"] == 6, delta


@pytest.mark.integration
def test_apache_counts_nothing_without_extended_status(session):
    deployed = deploy("static-page", session.run_dir("docroot"))
    running = RunningStack(STACKS["apache"])
    try:
        start_stack(running, knobs_for("apache"), deployed, session.run_dir("run"),
                    make_certificate(session.dir))
        assert stack_counters(running) == {}
    finally:
        assert stop_stack(running) == []


@pytest.mark.integration
def test_probes_are_placed_where_a_capability_asks_and_taken_back_at_stop(session):
    deployed = deploy("static-page", session.run_dir("docroot"))
    stacklab_dir = deployed.docroot / "_stacklab"
    running = RunningStack(STACKS["nginx+php-fpm+memcached"])
    try:
        start_stack(running, knobs_for("nginx+php-fpm+memcached"), deployed,
                    session.run_dir("run"), make_certificate(session.dir))
        assert {p.name for p in stacklab_dir.iterdir()} >= {"probe.php", "session.php"}
        verdicts = verify_stack(running, deployed)
    finally:
        assert stop_stack(running) == []
    assert not (stacklab_dir / "probe.php").exists()
    assert not (stacklab_dir / "session.php").exists()
    assert_all_pass(verdicts)
    sessions = next(v for v in verdicts if v.check == "sessions")
    assert sessions.data["page"] == "/_stacklab/session.php"   # no workload page needed
    assert not (deployed.docroot / ".htaccess").exists()


@pytest.mark.integration
def test_apache_gets_its_htaccess_files_only_with_allow_override_all(session):
    deployed = deploy("photos", session.run_dir("docroot"))
    directories = [deployed.docroot, *(p for p in deployed.docroot.rglob("*") if p.is_dir())]
    own = directories[-1] / ".htaccess"       # a site's own: kept, never taken back
    own.write_text("# the site's own\n")
    running = RunningStack(STACKS["apache"])
    try:
        start_stack(running, knobs_for("apache", apache__allow_override="all"), deployed,
                    session.run_dir("run"), make_certificate(session.dir))
        assert all((d / ".htaccess").is_file() for d in directories)
        assert own.read_text() == "# the site's own\n"
        assert_all_pass(verify_stack(running, deployed))
    finally:
        assert stop_stack(running) == []
    assert [d for d in directories if (d / ".htaccess").exists()] == [own.parent]
    own.unlink()


@pytest.mark.integration
def test_nginx_requests_counted_fails_when_its_status_does_not_count(session, monkeypatch):
    """A status page that always reports the same numbers (not the server's counters)."""
    frozen = ('return 200 "Active connections: 1 \\\\nserver accepts handled requests'
              '\\\\n 1 1 1 \\\\nReading: 0 Writing: 1 Waiting: 0 \\\\n";')
    tamper(monkeypatch, "nginx", "nginx.conf", r"^(\s*)stub_status;", r"\1" + frozen)
    verdicts = run_stack(session, "nginx")
    v = next(v for v in verdicts if v.check == "requests counted")
    assert v.status is Status.FAIL
    assert v.detail == "stub_status counted -1 of 3 requests"


@pytest.mark.integration
def test_memcached_sessions_fail_for_real_when_php_keeps_them_in_files(session, monkeypatch):
    """The stack claims sessions in memcached; its PHP writes them to files. The probe
    placed by the capability answers, and the verifier finds nothing in memcached."""
    tamper(monkeypatch, "php-fpm", "php.ini", r"^session.save_handler = memcached$",
           "session.save_handler = files")
    tamper(monkeypatch, "php-fpm", "php.ini", r'^session.save_path = ".*"$',
           'session.save_path = "/tmp"')
    verdicts = run_stack(session, "nginx+php-fpm+memcached")
    v = next(v for v in verdicts if v.check == "sessions")
    assert v.status is Status.FAIL, v
    sid = v.data["session_id"]
    assert v.detail == (f"/_stacklab/session.php answered 200; session {sid} is not in "
                        f"memcached (get memc.sess.key.{sid}: not found); total_items +0")
