"""The golden comparison is an instrument too: an update can never pass by itself, and
a config the server would reject fails before it is compared with its golden file."""

import re
import subprocess

import pytest

from helpers import assert_golden, assert_rendered_golden, tamper
from test_stacks import knobs_for

pytestmark = pytest.mark.integration


def test_update_golden_rewrites_the_file_then_fails_saying_so(tmp_path, monkeypatch):
    (tmp_path / "g.txt").write_text("old\n")
    monkeypatch.setenv("STACKLAB_UPDATE_GOLDEN", "1")
    with pytest.raises(pytest.fail.Exception, match=r"rewrote .*g\.txt \(changed\)"):
        assert_golden("g.txt", "new\n", tmp_path)
    assert (tmp_path / "g.txt").read_text() == "new\n"
    with pytest.raises(pytest.fail.Exception, match=r"\(unchanged\)"):
        assert_golden("g.txt", "new\n", tmp_path)      # even with nothing to change
    monkeypatch.delenv("STACKLAB_UPDATE_GOLDEN")
    assert_golden("g.txt", "new\n", tmp_path)
    with pytest.raises(AssertionError, match="differs from what is rendered now"):
        assert_golden("g.txt", "other\n", tmp_path)


@pytest.mark.parametrize("stack, component, file, pattern, replacement, message", [
    ("nginx", "nginx", "nginx.conf", r"^(\s*)sendfile (on|off);", r"\1sendfile maybe;",
     "invalid value \"maybe\""),
    ("apache", "apache", "httpd.conf", r"^KeepAlive On$", "KeepAlive Perhaps",
     "KeepAlive must be On or Off"),
    ("lighttpd", "lighttpd", "lighttpd.conf", r"^server.max-worker = 0$",
     "server.max-worker = ( \"many\" )", "unexpected type for key: server.max-worker"),
    ("nginx+php-fpm", "php-fpm", "php-fpm.conf", r"^pm = \w+$", "pm = sometimes",
     "invalid process manager"),
], ids=["nginx", "apache", "lighttpd", "php-fpm"])
def test_a_config_the_server_rejects_fails_before_any_golden_comparison(
        session, monkeypatch, stack, component, file, pattern, replacement, message):
    """Rendered text that a golden update would accept: the server's own config test is
    what rejects it, naming the server and quoting its message."""
    tamper(monkeypatch, component, file, pattern, replacement)
    with pytest.raises(AssertionError) as e:
        assert_rendered_golden(session.run_dir("golden"), stack, knobs_for(stack), "unused")
    assert f"{component}'s config test rejects the rendered unused files" in str(e.value)
    assert re.search(message, str(e.value)), str(e.value)


# The front layers (a balancer and two caches) are composed in front of a stack, never a
# named stack of their own: each is rendered alone, in front of fixed backends.
FRONT_BACKENDS = {"haproxy": 2, "varnish": 2, "squid": 1}
# Each front layer's own config check, given the rendered file (the argv it runs with
# must not start a server): haproxy -c, varnishd -C (compiles the VCL to C), squid -k parse.
FRONT_CHECKS = {
    "haproxy": lambda run_dir: ["-c", "-f", str(run_dir / "haproxy.cfg")],
    "varnish": lambda run_dir: ["-C", "-f", str(run_dir / "default.vcl"),
                                "-n", str(run_dir / "check"), "-j", "none"],
    "squid": lambda run_dir: ["-k", "parse", "-f", str(run_dir / "squid.conf")],
}


def rendered_front(base, name: str, overrides: dict) -> str:
    """`name`'s files and command line with its defaults and `overrides`, rendered into
    base/RUN/<name> in front of fixed backends and checked by the server itself; `base`
    reads /LAB, squid's per-directory service name (-n, a hash of it) reads SERVICE.
    Rendered as root (as `make test` runs): the users squid and varnishd drop to are in it."""
    from stacklab.host.net import Endpoint
    from stacklab.stacks import COMPONENTS, REGISTRY
    from stacklab.stacks.base import RenderContext
    from stacklab.stacks.squid.adapter import service_name
    comp = COMPONENTS[name]
    knobs = REGISTRY.defaults(name) | overrides
    backends = tuple(Endpoint("127.0.0.1", 8081 + i) for i in range(FRONT_BACKENDS[name]))
    ctx = RenderContext(base / "RUN" / name, base / "DOCROOT", "127.0.0.1", 8080,
                        "www-data", "www-data", backends=backends)
    ctx.run_dir.mkdir(parents=True)
    text = ""
    for rel, content in sorted(comp.render(ctx, knobs).items()):
        (ctx.run_dir / rel).write_text(content)
        text += f"==> {name}/{rel}\n{content}"
    text += f"==> {name} argv\n" + " ".join(comp.command(ctx, knobs)) + "\n"
    result = subprocess.run([comp.binary, *FRONT_CHECKS[name](ctx.run_dir)], cwd=ctx.run_dir,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, (f"{name}'s config test rejects the rendered files:\n"
                                    f"{result.stdout}{result.stderr}")
    return text.replace(service_name(ctx), "SERVICE").replace(str(base), "/LAB")


@pytest.mark.parametrize("name, overrides, golden", [
    ("haproxy", {}, "haproxy-default"),
    ("haproxy", {"balance": "static-rr", "weights": "3,1", "http_mode": "server-close",
                 "maxconn": 1024, "nbthread": 2, "server_maxconn": 32}, "haproxy-tuned"),
    ("varnish", {}, "varnish-default"),
    ("varnish", {"storage_mb": 64, "ttl": 30, "grace": 0, "honour_cache_control": False,
                 "honour_cookies": False, "thread_pools": 1, "thread_pool_min": 10,
                 "thread_pool_max": 200}, "varnish-tuned"),
    ("squid", {}, "squid-default"),
    ("squid", {"cache_mem_mb": 64, "disk_cache_mb": 100, "maximum_object_size_kb": 8192,
               "maximum_object_size_in_memory_kb": 64}, "squid-tuned"),
])
def test_front_layer_configs_pass_their_servers_check_and_match_golden_files(
        session, name, overrides, golden):
    assert_golden(f"{golden}.txt", rendered_front(session.run_dir("golden"), name, overrides))


@pytest.mark.parametrize("name, file, pattern, replacement, message", [
    ("haproxy", "haproxy.cfg", r"^(\s*)balance \w+$", r"\1balance sometimes",
     "balance only supports 'roundrobin'"),
    ("varnish", "default.vcl", r"^vcl 4\.\d;$", "vcl 9.9;", "VCL version 9.9 not supported"),
    ("squid", "squid.conf", r"^cache_mem (\d+) MB$", r"cache_mem lots MB", "cache_mem"),
], ids=["haproxy", "varnish", "squid"])
def test_a_front_layer_config_its_server_rejects_fails_before_any_golden_comparison(
        session, monkeypatch, name, file, pattern, replacement, message):
    """The front layers' checks can fail: a rendered file each server rejects."""
    tamper(monkeypatch, name, file, pattern, replacement)
    with pytest.raises(AssertionError) as e:
        rendered_front(session.run_dir("golden"), name, {})
    assert f"{name}'s config test rejects the rendered files" in str(e.value)
    assert re.search(message, str(e.value)), str(e.value)
