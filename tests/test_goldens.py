"""The golden comparison is an instrument too: an update can never pass by itself, and
a config the server would reject fails before it is compared with its golden file."""

import re

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
