"""Every verification FAIL, produced by a real server that does something other than its
knobs say: the rendered config is altered after rendering (the knobs still claim the
original), or the verifier is given an expectation that differs from what runs. Each
FAIL's detail must name what was observed, so that a check that always said PASS, or
that only echoed its knob, would fail here."""

import contextlib
import gzip
import json
import re
import socket
import sqlite3
import ssl
import threading
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from stacklab.host import lab
from stacklab.cli import cli
from stacklab.host.net import Endpoint
from stacklab.run.stack import RunningStack, start_stack, stop_stack
from stacklab.stacks import COMPONENTS, REGISTRY, STACKS, perl, php
from stacklab.stacks.apache import adapter as apache_adapter
from stacklab.stacks.base import RenderContext, free_port
from stacklab.stacks.tls import make_certificate
from stacklab.stacks.tlsverify import check_tls
from stacklab.measure.verify import CHECK_PATH, Status
from stacklab.workloads import deploy, place
from stacklab.workloads.appdata import AppDatabase

from fakes import use_fake_engine
from helpers import server_processes, tamper
from test_stacks import knobs_for, run_stack

pytestmark = pytest.mark.integration


def failed(verdicts, check: str):
    """The one verdict of `check`, asserted FAIL."""
    found = [v for v in verdicts if v.check == check]
    assert len(found) == 1, verdicts
    assert found[0].status is Status.FAIL, found[0]
    return found[0]


# keep-alive --------------------------------------------------------------------------

@pytest.mark.parametrize("stack, knobs, file, pattern, replacement, seen", [
    ("nginx", {}, "nginx.conf", r"keepalive_timeout \d+;", "keepalive_timeout 0;",
     "keep-alive is on but Connection: close; the server closed the connection"),
    ("nginx", {"nginx__keepalive_timeout": 0}, "nginx.conf", r"keepalive_timeout 0;",
     "keepalive_timeout 65;", "keep-alive is off but Connection: keep-alive; the second "
     "request reused the connection"),
    ("apache", {}, "httpd.conf", r"^KeepAlive On$", "KeepAlive Off",
     "keep-alive is on but Connection: close; the server closed the connection"),
    ("apache", {"apache__keepalive": False}, "httpd.conf", r"^KeepAlive Off$", "KeepAlive On",
     "keep-alive is off but Connection: (none); the second request reused the connection"),
    ("lighttpd", {}, "lighttpd.conf", r"^server.max-keep-alive-requests = \d+$",
     "server.max-keep-alive-requests = 0",
     "keep-alive is on but Connection: close; the server closed the connection"),
], ids=["nginx-on-but-closes", "nginx-off-but-keeps", "apache-on-but-closes",
        "apache-off-but-keeps", "lighttpd-on-but-closes"])
def test_keepalive_fails_on_what_the_wire_shows(session, monkeypatch, stack, knobs, file,
                                                pattern, replacement, seen):
    tamper(monkeypatch, stack, file, pattern, replacement)
    v = failed(run_stack(session, stack, **knobs), "keep-alive")
    assert v.detail.startswith(seen), v.detail
    assert "the server's keep-alive; the load's is load.keepalive" in v.detail  # not the run's
    assert v.data["second_request_reused"] is ("reused" in seen)


def test_keepalive_says_it_checks_the_server_not_the_load(session):
    """load.keepalive = false: the engine closes its connections, but the verdict is about
    the server, and says so."""
    verdicts = run_stack(session, "nginx", load__keepalive=False)
    v = next(v for v in verdicts if v.check == "keep-alive")
    assert v.status is Status.PASS
    assert "the second request reused the connection" in v.detail
    assert "the server's keep-alive; the load's is load.keepalive" in v.detail


# gzip --------------------------------------------------------------------------------

@pytest.mark.parametrize("stack, knobs, file, pattern, replacement, seen", [
    ("nginx", {"nginx__gzip": True}, "nginx.conf", r"^(\s*)gzip on;", r"\1gzip off;",
     "gzip is on but with Accept-Encoding: gzip the response had Content-Encoding: (none)"),
    ("nginx", {}, "nginx.conf", r"^(\s*)(keepalive_requests \d+;)",
     r"\1\2\n\1gzip on;\n\1gzip_min_length 20;",
     "gzip is off but with Accept-Encoding: gzip the response had Content-Encoding: gzip"),
    ("apache", {"apache__deflate": True}, "httpd.conf", r"^AddOutputFilterByType DEFLATE .*$",
     "", "gzip is on but with Accept-Encoding: gzip the response had Content-Encoding: (none)"),
    ("lighttpd", {"lighttpd__deflate": True}, "lighttpd.conf",
     r"^deflate.mimetypes = .*$", 'deflate.mimetypes = ( "application/x-none" )',
     "gzip is on but with Accept-Encoding: gzip the response had Content-Encoding: (none)"),
], ids=["nginx-on-but-plain", "nginx-off-but-compressed", "apache-on-but-plain",
        "lighttpd-on-but-plain"])
def test_gzip_fails_on_the_content_encoding_seen(session, monkeypatch, stack, knobs, file,
                                                pattern, replacement, seen):
    tamper(monkeypatch, stack, file, pattern, replacement)
    v = failed(run_stack(session, stack, **knobs), "gzip")
    assert v.detail.startswith(seen), v.detail
    assert re.search(r", \d+ B \(plain \d+ B\)$", v.detail), v.detail



def test_gzip_fails_when_the_server_compresses_without_being_asked(session, monkeypatch):
    """gzip_static always: every client gets the .gz bytes, asked or not."""
    tamper(monkeypatch, "nginx", "nginx.conf", r"gzip_static on;", "gzip_static always;")
    verdicts = run_stack(session, "nginx", "portal-page:26k", nginx__gzip_static=True)
    assert failed(verdicts, "gzip").detail == ("compressed without being asked: "
                                                "Content-Encoding: gzip")
    assert failed(verdicts, "precompressed").detail == (
        "a client without Accept-Encoding did not get the original file")


def test_gzip_fails_when_the_gzip_body_is_not_the_page(session):
    """gzip_static serves a .gz that is not the file's compression: the body a gzip client
    decodes differs from the one a plain client gets."""
    deployed = deploy("portal-page:26k", session.run_dir("docroot-portal"))
    place(deployed.docroot, CHECK_PATH + ".gz", gzip.compress(b"<p>another page</p>\n"))
    verdicts = run_stack(session, "nginx", deployed=deployed, nginx__gzip_static=True)
    v = failed(verdicts, "gzip")
    assert v.detail.startswith("decompressed body differs from the plain one; with "
                               "Accept-Encoding: gzip the response had Content-Encoding: "
                               "gzip"), v.detail


@pytest.mark.parametrize("knob, pattern, replacement, seen", [
    (True, r"gzip_static on;", "gzip_static off;",
     re.escape("Content-Encoding is (none), expected gzip")),
    (True, r"gzip_static on;", "gzip_static off;\n    gzip on;\n    gzip_min_length 20;",
     r"got \d+ gzip bytes that are not the \d+ B of /_stacklab/check.html.gz "
     r"\(compressed on the fly\?\)"),
    (False, r"^(\s*)(keepalive_requests \d+;)", r"\1\2\n\1gzip_static on;",
     re.escape("the knob is off but the precompressed .gz file was sent")),
], ids=["on-but-not-sent", "on-but-compressed-on-the-fly", "off-but-sent"])
def test_precompressed_fails_on_the_bytes_a_gzip_client_gets(session, monkeypatch, knob,
                                                             pattern, replacement, seen):
    tamper(monkeypatch, "nginx", "nginx.conf", pattern, replacement)
    verdicts = run_stack(session, "nginx", "portal-page:26k", nginx__gzip_static=knob)
    v = failed(verdicts, "precompressed")
    assert re.fullmatch(seen, v.detail), v.detail


# content -----------------------------------------------------------------------------

def test_content_fails_on_the_bytes_served(session):
    """The page changed on disk after it was deployed: the server serves what is there,
    and the content check names the size and hash it got against the expected ones."""
    deployed = deploy("static-page", session.run_dir("docroot-static-page"))
    [(path, want)] = [(p, e) for p, e in deployed.expected.items() if e.sha256]
    place(deployed.docroot, path, b"<p>not the deployed page</p>\n")
    v = failed(run_stack(session, "nginx", deployed=deployed), f"content {path}")
    assert re.fullmatch(rf"got 29 B sha256 [0-9a-f]{{12}}, expected {want.length} B "
                        rf"sha256 {want.sha256[:12]}", v.detail), v.detail


# expires -----------------------------------------------------------------------------

@pytest.mark.parametrize("stack, file, pattern, replacement", [
    ("nginx", "nginx.conf", r"expires 1d;", "expires 1h;"),
    ("apache", "httpd.conf", r'"access plus 1 day"', '"access plus 1 hour"'),
])
def test_expires_fails_on_the_max_age_sent(session, monkeypatch, stack, file, pattern,
                                           replacement):
    tamper(monkeypatch, stack, file, pattern, replacement)
    v = failed(run_stack(session, stack, **{f"{stack}__expires": "1d"}), "expires")
    assert "max-age=3600" in v.detail and "expected max-age=86400" in v.detail


# TLS ---------------------------------------------------------------------------------

TLS12 = {"tls": True, "tls_protocols": "TLSv1.2", "tls_ciphers": "ECDHE-RSA-AES128-GCM-SHA256"}


@pytest.mark.parametrize("stack, file, pattern, replacement", [
    ("nginx", "nginx.conf", r"ssl_protocols TLSv1.2;", "ssl_protocols TLSv1.2 TLSv1.3;"),
    ("apache", "httpd.conf", r"^SSLProtocol -all \+TLSv1.2$", "SSLProtocol -all +TLSv1.2 +TLSv1.3"),
    ("lighttpd", "lighttpd.conf", r'"MaxProtocol" => "TLSv1.2"', '"MaxProtocol" => "TLSv1.3"'),
])
def test_tls_fails_on_the_protocol_negotiated(session, monkeypatch, stack, file, pattern,
                                              replacement):
    tamper(monkeypatch, stack, file, pattern, replacement)
    verdicts = run_stack(session, stack, **{f"{stack}__{k}": v for k, v in TLS12.items()})
    protocol = failed(verdicts, "tls protocol")
    assert protocol.detail.startswith("negotiated TLSv1.3"), protocol.detail
    assert protocol.detail.endswith("expected TLSv1.2"), protocol.detail
    refused = failed(verdicts, "tls refuses TLSv1.3")
    assert "a handshake succeeded" in refused.detail


def test_tls_fails_on_the_cipher_and_the_resumption_seen(session, monkeypatch):
    tamper(monkeypatch, "nginx", "nginx.conf", r"ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256;",
           "ssl_ciphers ECDHE-RSA-AES256-GCM-SHA384;")
    tamper(monkeypatch, "nginx", "nginx.conf", r"ssl_session_cache \S+;",
           "ssl_session_cache off;")
    tamper(monkeypatch, "nginx", "nginx.conf", r"ssl_session_tickets on;",
           "ssl_session_tickets off;")
    verdicts = run_stack(session, "nginx", **{f"nginx__{k}": v for k, v in TLS12.items()})
    cipher = failed(verdicts, "tls cipher")
    assert cipher.detail == ("TLS 1.2 cipher ECDHE-RSA-AES256-GCM-SHA384; expected "
                             "ECDHE-RSA-AES128-GCM-SHA256")
    resumption = failed(verdicts, "tls resumption")
    assert resumption.detail.startswith("session not resumed, NOT expected")



def test_tls_fails_when_the_server_speaks_no_tls(session):
    """A plain-HTTP nginx checked as if its tls knob were on: no handshake at all."""
    deployed = deploy("static-page", session.run_dir("docroot-static-page"))
    running = RunningStack(STACKS["nginx"])
    try:
        start_stack(running, knobs_for("nginx"), deployed, session.run_dir("run"),
                    make_certificate(session.dir))
        verdicts = check_tls("nginx", running.front.endpoint, knobs_for(
            "nginx", **{f"nginx__{k}": v for k, v in TLS12.items()})["nginx"])
    finally:
        assert stop_stack(running) == []
    [v] = verdicts
    assert (v.check, v.status) == ("tls", Status.FAIL), v
    assert v.detail.startswith("handshake failed: ") and "WRONG_VERSION_NUMBER" in v.detail


def test_tls_cipher_fails_when_tls12_is_not_offered(session, monkeypatch):
    """The knobs offer TLS 1.2 and 1.3 with a TLS 1.2 cipher; the server offers 1.3 only:
    the negotiated protocol is right, the TLS 1.2 handshake for the cipher fails."""
    tamper(monkeypatch, "nginx", "nginx.conf", r"ssl_protocols TLSv1.2 TLSv1.3;",
           "ssl_protocols TLSv1.3;")
    both = TLS12 | {"tls_protocols": "TLSv1.2 TLSv1.3"}
    verdicts = run_stack(session, "nginx", **{f"nginx__{k}": v for k, v in both.items()})
    assert next(v for v in verdicts if v.check == "tls protocol").status is Status.PASS
    cipher = failed(verdicts, "tls cipher")
    assert cipher.detail.startswith("TLS 1.2 failed: "), cipher.detail


def test_tls_resumption_fails_when_the_second_handshake_is_refused(tmp_path):
    """A TLS server that answers one connection and then stops listening: the first
    handshake succeeds, the resumption handshake cannot even connect. No stack can be
    told to do this; a real TLS listener on loopback can."""
    cert, key = make_certificate(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve_once():
        conn, _ = listener.accept()
        listener.close()
        with ctx.wrap_socket(conn, server_side=True) as tls:
            tls.recv(65536)
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            with contextlib.suppress(OSError):   # the client closes without its own
                tls.unwrap()                      # close_notify; ours is what counts

    server = threading.Thread(target=serve_once, daemon=True)
    server.start()
    verdicts = check_tls("once", Endpoint("127.0.0.1", port, scheme="https"), {
        "tls_protocols": "TLSv1.3", "tls_ciphers": "default",
        "tls_session_cache": True, "tls_session_tickets": True})
    server.join(5)
    assert [(v.check, v.status) for v in verdicts[:2]] == [
        ("tls protocol", Status.PASS), ("tls refuses TLSv1.2", Status.PASS)], verdicts
    resumption = failed(verdicts, "tls resumption")
    assert resumption.detail.startswith("second handshake: ") and \
        "Connection refused" in resumption.detail, resumption.detail


# the server's processes --------------------------------------------------------------

MPM_LINE = r"^LoadModule mpm_{0}_module .*$"
MPM_MODULE = "LoadModule mpm_{0}_module /usr/lib/apache2/modules/mod_mpm_{0}.so"
ITK_MODULE = "LoadModule mpm_itk_module /usr/lib/apache2/modules/mpm_itk.so"


@pytest.mark.parametrize("mpm, pattern, replacement, seen", [
    ("event", MPM_LINE.format("event"), MPM_MODULE.format("worker"),
     "server reports MPM worker, expected event"),
    ("worker", MPM_LINE.format("worker"), MPM_MODULE.format("event"),
     "server reports MPM event, expected worker"),
    ("itk", MPM_LINE.format("itk"), "", "server reports MPM prefork, expected itk"),
    ("prefork", MPM_LINE.format("prefork"), MPM_MODULE.format("prefork") + "\n" + ITK_MODULE,
     "server reports MPM prefork with mpm-itk, expected prefork"),
], ids=["event-runs-worker", "worker-runs-event", "itk-runs-prefork", "prefork-runs-itk"])
def test_apache_mpm_fails_on_the_mpm_the_server_reports(session, monkeypatch, mpm, pattern,
                                                        replacement, seen):
    tamper(monkeypatch, "apache", "httpd.conf", pattern, replacement)
    v = failed(run_stack(session, "apache", apache__mpm=mpm), "mpm")
    assert v.detail == seen


def test_lighttpd_workers_fail_on_the_processes_counted(session, monkeypatch):
    tamper(monkeypatch, "lighttpd", "lighttpd.conf", r"^server.max-worker = 0$",
           "server.max-worker = 2")
    v = failed(run_stack(session, "lighttpd"), "workers")
    assert re.fullmatch(r"[23] lighttpd processes, expected 1", v.detail), v.detail


def test_nofile_fails_on_the_limits_the_processes_have(session, monkeypatch):
    tamper(monkeypatch, "nginx", "nginx.conf", r"worker_rlimit_nofile 4096;",
           "worker_rlimit_nofile 2048;")
    v = failed(run_stack(session, "nginx", nginx__nofile=4096, nginx__worker_processes=1),
               "nofile")
    assert v.detail == "open-files limit of its processes: [2048, 4096], expected 4096"


# PHP and Perl ------------------------------------------------------------------------

def test_php_sapi_fails_when_another_sapi_runs(session, monkeypatch):
    """The stack claims mod_php's SAPI; PHP-FPM is what answers."""
    monkeypatch.setattr(type(COMPONENTS["php-fpm"]), "provides", (php.APACHE2HANDLER,))
    v = failed(run_stack(session, "nginx+php-fpm", "php-page"), "sapi")
    assert v.detail == "PHP_SAPI is fpm-fcgi, expected apache2handler"


def test_php_opcache_fails_when_the_ini_turns_it_off(session, monkeypatch):
    tamper(monkeypatch, "php-fpm", "php.ini", r"^opcache.enable = 1$", "opcache.enable = 0")
    v = failed(run_stack(session, "nginx+php-fpm", "php-page", php__opcache=True), "opcache")
    assert "opcache_enabled is False" in v.detail



def test_php_opcache_fails_when_the_extension_is_not_loaded(session, monkeypatch):
    tamper(monkeypatch, "php-fpm", "conf.d/extensions.ini", r"^zend_extension=opcache.so$", "")
    v = failed(run_stack(session, "nginx+php-fpm", "php-page", php__opcache=True), "opcache")
    assert v.detail == "OPcache extension loaded is False, php.opcache says True"


def test_php_opcache_fails_when_it_is_on_but_caches_nothing(session, monkeypatch):
    """One PHP-FPM worker, OPcache enabled, but no file small enough to be cached
    (opcache.max_file_size = 1 byte): the probe never hits."""
    tamper(monkeypatch, "php-fpm", "php.ini", r"^opcache.enable = 1$",
           "opcache.enable = 1\nopcache.max_file_size = 1")
    v = failed(run_stack(session, "nginx+php-fpm", "php-page", php__opcache=True,
                         **{"php-fpm__pm": "static", "php-fpm__max_children": 1}), "opcache")
    assert v.detail == "OPcache is on but never hits"


def test_php_apcu_fails_when_the_ini_turns_it_off(session, monkeypatch):
    tamper(monkeypatch, "php-fpm", "php.ini", r"^apc.enabled = 1$", "apc.enabled = 0")
    verdicts = run_stack(session, "nginx+php-fpm", "php-page", php__apcu=True)
    assert failed(verdicts, "apcu").detail == "apcu_enabled is False, knob says True"


def test_php_session_directory_fails_on_the_save_path_php_reports(session, monkeypatch):
    tamper(monkeypatch, "php-fpm", "php.ini", r"^session.save_path = .*$",
           "session.save_path = /tmp")
    v = failed(run_stack(session, "nginx+php-fpm", "php-page"), "session directory")
    assert v.detail == "session.save_path /tmp, expected …/sessions"


def test_php_probe_fails_when_php_cannot_run_it(session, monkeypatch):
    """json_encode disabled: the probe dies with a fatal error, PHP-FPM answers 500."""
    tamper(monkeypatch, "php-fpm", "php.ini", r"^expose_php = .*$",
           "\\g<0>\ndisable_functions = json_encode")
    verdicts = run_stack(session, "nginx+php-fpm", "php-page")
    v = failed(verdicts, "probe")
    assert v.detail == "PHP probe failed: probe /_stacklab/probe.php: status 500"
    assert not [v for v in verdicts if v.component == "php" and v.check != "probe"]


def test_php_ini_fails_on_what_php_reports(session, monkeypatch):
    tamper(monkeypatch, "php-fpm", "php.ini", r"^expose_php = Off$", "expose_php = On")
    v = failed(run_stack(session, "nginx+php-fpm", "php-page", php__expose_php=False),
               "php.ini")
    assert "expose_php" in v.detail, v.detail


def test_php_process_per_request_fails_when_processes_persist(session, monkeypatch):
    """The stack claims a new PHP process per request (plain CGI); mod_fcgid keeps them."""
    monkeypatch.setitem(apache_adapter.PHP_CAPABILITY, "fcgid", php.CGI)
    v = failed(run_stack(session, "apache+fcgid", "php-page"), "process per request")
    assert re.fullmatch(r"expected a new PHP process per request, saw pids \[\d+(, \d+)?\]",
                        v.detail), v.detail


def test_perl_handler_fails_when_another_handler_runs(session, monkeypatch):
    """The stack claims ModPerl::Registry; plain CGI is what answers."""
    monkeypatch.setitem(apache_adapter.PERL_CAPABILITY, "cgi",
                        perl.CAPABILITIES["perl:registry"])
    v = failed(run_stack(session, "apache+perl-cgi", "perl-page"), "handler registry")
    assert v.detail.startswith("no mod_perl")



def test_perl_probe_fails_when_apache_does_not_run_it(session, monkeypatch):
    """Apache refuses the probe's URL (403) instead of running it."""
    tamper(monkeypatch, "apache", "httpd.conf", r"^(KeepAlive (On|Off))$",
           r"\1\n<Location /_stacklab/probe.pl>\n    Require all denied\n</Location>")
    verdicts = run_stack(session, "apache+perl-cgi", "perl-page")
    assert failed(verdicts, "probe").detail == "Perl probe failed: status 403"


# MariaDB -----------------------------------------------------------------------------

def small_app(session):
    """The model application on 1,000 articles (quick to seed)."""
    deployed = deploy("app-mix", session.run_dir("docroot-app-mix"), seed=5)
    return replace(deployed, database=AppDatabase(5, articles=1000))


def test_mariadb_settings_fail_on_the_values_the_server_reports(session, monkeypatch):
    tamper(monkeypatch, "mariadb", "my.cnf", r"^innodb_buffer_pool_size = 128M$",
           "innodb_buffer_pool_size = 64M")
    verdicts = run_stack(session, "nginx+php-fpm+mariadb", deployed=small_app(session))
    v = failed(verdicts, "settings")
    assert v.detail == ("not applied: innodb_buffer_pool_size = 67108864 "
                        "(wanted 134217728)")


def test_mariadb_query_cache_fails_on_the_hits_counted(session, monkeypatch):
    tamper(monkeypatch, "mariadb", "my.cnf", r"^query_cache_size = 16M$", "query_cache_size = 0M")
    verdicts = run_stack(session, "nginx+php-fpm+mariadb", deployed=small_app(session),
                         mariadb__query_cache_type="on")
    v = failed(verdicts, "query cache")
    assert v.detail == "query cache is on but a repeated page got 0 hits"


# memcached ---------------------------------------------------------------------------

def test_memcached_sessions_are_read_back_from_memcached(session):
    verdicts = run_stack(session, "nginx+php-fpm+memcached", "php-session")
    v = next(v for v in verdicts if v.check == "sessions")
    assert v.status is Status.PASS, v
    assert v.data["found"] and v.data["total_items_added"] >= 1
    assert v.detail.startswith(f"session {v.data['session_id'][:8]}… stored in memcached")


def test_memcached_sessions_fail_when_php_keeps_them_in_files(session):
    """A real memcached beside nginx + PHP-FPM whose sessions go to files: the session
    page works, but nothing lands in memcached, and the verdict says which key it missed."""
    deployed = deploy("php-session", session.run_dir("docroot-php-session"))
    running = RunningStack(STACKS["nginx+php-fpm"])
    memcached = COMPONENTS["memcached"]
    user, group = lab.server_user()
    ctx = RenderContext(session.run_dir("memcached"), deployed.docroot, "127.0.0.1",
                        free_port(), user, group)
    store = memcached.start(ctx, REGISTRY.defaults("memcached"))
    try:
        start_stack(running, knobs_for("nginx+php-fpm"), deployed, session.run_dir("run"),
                    make_certificate(session.dir))
        [sessions] = memcached.provides
        [v] = sessions.verify(store, running.front)
    finally:
        assert stop_stack(running) == []
        memcached.stop(store)
    assert v.status is Status.FAIL, v
    sid = v.data["session_id"]
    assert sid and v.data["found"] is False
    assert v.detail == (f"/session.php answered 200; session {sid} is not in memcached "
                        f"(get memc.sess.key.{sid}: not found); total_items +0")


# end to end --------------------------------------------------------------------------

LYING = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "lying"
repetitions = 1
requests = 200
warmup = "0s"

[knobs]
nginx.gzip = true

[matrix]
stack = ["nginx", "apache"]
workload = ["static-page"]
concurrency = [1]
"""


def test_an_experiment_whose_verification_fails_stores_an_invalid_run_without_load(
        tmp_path, monkeypatch):
    """nginx's config has gzip off while nginx.gzip says on: its run is `invalid`, the load
    engine never runs against it, `show` counts it; apache's run goes on and is measured.
    (The fake engine: what is counted is which runs reach a load, not its figures.)"""
    tamper(monkeypatch, "nginx", "nginx.conf", r"^(\s*)gzip on;", r"\1gzip off;")
    engine = use_fake_engine(monkeypatch, tmp_path / "engine")
    spec, db = tmp_path / "lying.toml", tmp_path / "stacklab.db"
    spec.write_text(LYING)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    rows = {label.split()[0]: (outcome, reason, load, rps, json.loads(verdicts))
            for label, outcome, reason, load, rps, verdicts in sqlite3.connect(db).execute(
                "SELECT t.label, r.outcome, r.reason, r.load_json, r.rps, r.verdicts_json "
                "FROM runs r JOIN trials t USING (trial_id)")}
    outcome, reason, load, rps, verdicts = rows["nginx"]
    assert outcome == "invalid"
    assert load is None and rps is None                  # no engine report stored
    assert reason.startswith("gzip: gzip is on but with Accept-Encoding: gzip the response "
                             "had Content-Encoding: (none)")
    assert {v["check"]: v["status"] for v in verdicts}["gzip"] == "FAIL"
    assert rows["apache"][0] == "ok" and rows["apache"][2] is not None, rows["apache"][1]
    [load] = engine.runs()                  # the engine ran for apache's run only
    assert json.loads(rows["apache"][2]) == load["report"]

    shown = CliRunner().invoke(cli, ["show", "lying", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    nginx_row = next(line for line in shown.output.splitlines()
                     if line.startswith("nginx"))       # its name's first line
    assert "+1 invalid" in nginx_row, shown.output
    assert "Content-Encoding: (none)" in shown.output.replace("\n", " ")
    assert server_processes() == []
