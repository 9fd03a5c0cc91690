"""lighttpd, mini_httpd and webfsd on loopback: start from our configs, verify, serve,
stop, no leftovers; their rendered configs against golden files."""


import pytest

from stacklab.stacks import COMPONENTS, REGISTRY, STACKS

from helpers import assert_rendered_golden
from test_stacks import assert_all_pass, knobs_for, statuses
from test_stacks import run_stack as _run_stack

pytestmark = pytest.mark.integration


def run_stack(session, stack, workload="static-page", run_as=None, **overrides):
    knobs = knobs_for(stack, **overrides)
    problems = [COMPONENTS[c].check(knobs[c]) for c in STACKS[stack].components]
    assert not any(problems), problems     # e.g. a Debian package of a lighttpd module
    return _run_stack(session, stack, workload, run_as, **overrides)   # checks leftovers


def verdict(verdicts, check):
    return next(v for v in verdicts if v.check == check)


def test_small_servers_fixed_behaviour_is_verified(session):
    """mini_httpd cannot keep a connection open, webfsd cannot close one; neither
    compresses. The verdicts say so, with their knobs away from the defaults."""
    mini = run_stack(session, "mini-httpd", **{"mini-httpd__access_log": False,
                                               "mini-httpd__max_age": 3600})
    webfs = run_stack(session, "webfs", webfs__access_log=False, webfs__timeout=5,
                      webfs__max_connections=256, webfs__expires=3600)
    assert_all_pass(mini + webfs)
    assert "closed" in verdict(mini, "keep-alive").detail
    assert "the second request reused the connection" in verdict(webfs, "keep-alive").detail


def test_lighttpd_php_fpm_runs_php_under_fpm(session):
    verdicts = run_stack(session, "lighttpd+php-fpm", "php-page", **{
        "php-fpm__listen": "tcp", "lighttpd__max_worker": 2})
    assert_all_pass(verdicts)
    got = statuses(verdicts)
    assert got["php:sapi"] == "PASS" and got["stack:content /index.php"] == "PASS"
    assert verdict(verdicts, "workers").detail.startswith("3 lighttpd processes")


def test_lighttpd_gzip_is_on_exactly_when_the_knob_says(session):
    on = run_stack(session, "lighttpd", lighttpd__deflate=True, lighttpd__deflate_level=6)
    off = run_stack(session, "lighttpd", lighttpd__deflate=False)
    assert_all_pass(on + off)
    assert verdict(on, "gzip").detail.startswith("compressed")
    assert "not compressed" in verdict(off, "gzip").detail


def test_lighttpd_keepalive_off_really_closes(session):
    verdicts = run_stack(session, "lighttpd", lighttpd__max_keep_alive_requests=0,
                         lighttpd__access_log=False)
    assert_all_pass(verdicts)
    assert "closed" in verdict(verdicts, "keep-alive").detail


@pytest.mark.parametrize("resume", [True, False])
def test_lighttpd_tls_protocol_cipher_and_resumption(session, resume):
    verdicts = run_stack(session, "lighttpd", lighttpd__tls=True,
                         lighttpd__tls_protocols="TLSv1.2",
                         lighttpd__tls_ciphers="ECDHE-RSA-AES128-GCM-SHA256",
                         lighttpd__tls_session_tickets=resume)
    assert_all_pass(verdicts)
    assert statuses(verdicts)["lighttpd:tls refuses TLSv1.3"] == "PASS"
    assert statuses(verdicts)["lighttpd:tls cipher"] == "PASS"
    resumption = verdict(verdicts, "tls resumption").detail
    assert resumption.startswith("session resumed" if resume else "session not resumed")


def test_lighttpd_has_no_server_side_session_cache():
    knob = REGISTRY.get("lighttpd.tls_session_cache")
    assert knob.default is False
    with pytest.raises(ValueError, match="lighttpd.tls_session_cache must be one of False"):
        knob.check(True)


@pytest.mark.parametrize("stack, overrides, golden", [
    ("lighttpd", {}, "lighttpd-default"),
    ("lighttpd", {"lighttpd__max_worker": 4, "lighttpd__max_keep_alive_requests": 0,
                  "lighttpd__deflate": True, "lighttpd__deflate_level": 6,
                  "lighttpd__access_log": False, "lighttpd__nofile": 65536,
                  "lighttpd__tls": True, "lighttpd__tls_protocols": "TLSv1.3",
                  "lighttpd__tls_session_tickets": False}, "lighttpd-tuned"),
    ("lighttpd+php-fpm", {"php-fpm__listen": "unix"}, "lighttpd-php-fpm"),
    ("mini-httpd", {"mini-httpd__max_age": 3600}, "mini-httpd"),
    ("webfs", {"webfs__timeout": 5, "webfs__max_connections": 256}, "webfs"),
])
def test_rendered_configs_pass_the_servers_config_test_and_match_golden_files(
        session, stack, overrides, golden):
    """Configs and argv (mini_httpd and webfsd take most settings as arguments)."""
    assert_rendered_golden(session.run_dir("golden"), stack, knobs_for(stack, **overrides),
                           golden, argv=True)


def test_lighttpd_names_the_package_of_a_missing_module(tmp_path, monkeypatch):
    from stacklab.stacks.lighttpd import adapter
    monkeypatch.setattr(adapter, "MODULES", tmp_path)
    lighttpd = COMPONENTS["lighttpd"]
    assert lighttpd.check(knobs_for("lighttpd")["lighttpd"]) is None
    problem = lighttpd.check(knobs_for("lighttpd", lighttpd__tls=True)["lighttpd"])
    assert "apt-get install lighttpd-mod-openssl" in problem
