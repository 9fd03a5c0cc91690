"""Components speak for themselves: each says which lines of its own logs mean a lost
worker (measurement.child_signals asks it about its own logs only), and a database
component words its client library's errors (the CLI's boundary asks it)."""

import pymysql
import pytest

from stacklab.run import measurement
from stacklab.stacks import COMPONENTS
from stacklab.stacks.base import Component

NGINX = "2026/11/27 22:30:01 [alert] 7#7: worker process 123 exited on signal 9"
FPM_KILLED = "WARNING: [pool www] child 13 exited on signal 9 (SIGKILL) after 2.0 seconds"
FPM_REAPED = "NOTICE: [pool www] child 11 exited on signal 3 (SIGQUIT) after 10.5 seconds"
FPM_EXITED = "NOTICE: [pool www] child 12 exited with code 0 after 3.1 seconds from start"
APACHE = "[mpm_event:notice] AH00052: child pid 14 exit signal Segmentation fault (11)"


@pytest.mark.parametrize("component, line, lost", [
    ("nginx", NGINX, True),
    ("nginx-proxy", NGINX, True),
    ("nginx", "[notice] 7#7: signal 17 (SIGCHLD) received from 123", False),
    ("php-fpm", FPM_KILLED, True),
    ("php-fpm", FPM_REAPED, False),       # its pm's reaping of an idle child
    ("php-fpm", FPM_EXITED, False),
    ("apache", APACHE, True),
    ("apache-proxy", APACHE, True),
    ("apache", "[mpm_event:notice] AH00489: Apache/2.4.62 configured", False),
    ("lighttpd", NGINX, False),           # not its wording: a server tells only its own
    ("mariadb", APACHE, False),
])
def test_each_server_tells_its_own_lost_workers(component, line, lost):
    assert COMPONENTS[component].lost_worker(line) is lost


def test_child_signals_asks_each_server_about_its_own_logs_only(tmp_path):
    for name, text in [("nginx", f"{APACHE}\n{NGINX}\n"), ("lighttpd", f"{NGINX}\n")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "error.log").write_text(text)
    (tmp_path / "nginx" / "access.log").write_text(f'"GET /{NGINX}" 404\n')
    servers = [(COMPONENTS[name], tmp_path / name) for name in ("lighttpd", "nginx")]
    assert measurement.child_signals(tmp_path, servers) == [f"nginx/error.log: {NGINX}"]


def test_a_new_component_is_asked_with_no_change_to_generic_code(tmp_path):
    class Dummy(Component):
        name, knobs = "dummy", []

        def render(self, ctx, knobs):
            return {}

        def command(self, ctx, knobs):
            return []

        def lost_worker(self, line):
            return line.startswith("LOST ")

    (tmp_path / "dummy").mkdir()
    (tmp_path / "dummy" / "dummy.log").write_text("ok\nLOST worker 7\n")
    assert measurement.child_signals(tmp_path, [(Dummy(), tmp_path / "dummy")]) == [
        "dummy/dummy.log: LOST worker 7"]
    assert Dummy().sql_client() is None and Dummy().error_line(ValueError()) is None


def test_the_database_component_words_its_client_librarys_errors():
    mariadb = COMPONENTS["mariadb"]
    assert mariadb.error_line(pymysql.err.OperationalError(1045, "Access denied")) == (
        "MariaDB: Access denied (error 1045)")
    assert mariadb.error_line(OSError("disk")) is None
    assert mariadb.sql_client().errors is pymysql.MySQLError
    assert mariadb.sql_client().library_versions() == {"pymysql": pymysql.__version__}
    others = [c for name, c in COMPONENTS.items() if name != "mariadb"]
    assert all(c.error_line(pymysql.MySQLError("x")) is None for c in others)
