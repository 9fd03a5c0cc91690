"""Unix sockets fit whatever TMPDIR is (issue 21): a socket's path holds at most 107 bytes
(HAProxy's 95: it binds <path>.<pid>.tmp first), and a run directory under a long TMPDIR
holds more, so every MariaDB run failed from a TMPDIR of ~18 characters, HAProxy from ~34
and PHP-FPM from ~60. A socket that does not fit its run directory goes to the session's
short directory in the machine-wide registry (lab.socket_path)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.host import lab
from stacklab.netlab.sweep import SWEEPS
from stacklab.cli import cli
from stacklab.errors import UnsafePathError
from stacklab.run.exportconfig import clean
from stacklab.stacks.haproxy import stats

from helpers import require_engine

LONG = 80          # characters of TMPDIR: every MariaDB run failed from ~18


@pytest.fixture
def long_tmpdir(monkeypatch, request):
    """A TMPDIR of LONG characters (or the test's parameter) every user can search."""
    length = getattr(request, "param", LONG)
    base = Path(tempfile.mkdtemp(prefix="sockpaths-", dir="/tmp"))
    path = base / ("d" * (length - len(str(base)) - 1))
    path.mkdir()
    for made in (base, path):
        made.chmod(0o755)
    assert len(str(path)) == length
    monkeypatch.setenv("TMPDIR", str(path))
    monkeypatch.setattr(tempfile, "tempdir", None)     # gettempdir() reads TMPDIR again
    yield path
    shutil.rmtree(base, ignore_errors=True)


def test_a_socket_that_fits_stays_in_its_run_directory():
    with lab.session_scope(sweeps=SWEEPS) as session:
        run_dir = session.run_dir("0123456789ab-r0/mariadb")
        assert lab.socket_path(run_dir, "mariadb.sock", "mariadb") == run_dir / "mariadb.sock"


def test_a_long_run_directorys_socket_goes_to_the_sessions_short_directory(long_tmpdir):
    with lab.session_scope(sweeps=SWEEPS) as session:
        run_dir = session.run_dir("0123456789ab-r0/php-fpm")
        assert len(os.fsencode(run_dir / "php-fpm.sock")) > lab.SUN_PATH_MAX
        path = lab.socket_path(run_dir, "php-fpm.sock", "php-fpm")
        assert len(os.fsencode(path)) <= lab.SUN_PATH_MAX
        assert path.parent.parent == session.entry and path.parent.name.endswith("-php-fpm")
        assert lab.socket_path(run_dir, "php-fpm.sock", "php-fpm") == path   # one place
        assert lab.socket_path(session.run_dir("0123456789ab-r1/php-fpm"), "php-fpm.sock",
                               "php-fpm") != path                        # one per run dir
        assert stat_mode(path.parent) == stat_mode(path.parent.parent) == 0o755
    assert not session.entry.exists()                 # closed: its sockets go with it


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_haproxys_limit_leaves_room_for_its_temporary_name():
    """A stats socket path of 96 bytes fits sun_path but not HAProxy's <path>.<pid>.tmp
    (a 7-digit pid): it goes to the short directory; one of 95 stays."""
    with lab.session_scope(sweeps=SWEEPS) as session:
        def run_dir(size: int) -> Path:
            return session.dir / ("h" * (size - len(str(session.dir)) - len("//haproxy.sock")))
        assert len(os.fsencode(run_dir(96) / stats.SOCKET)) == 96
        assert stats.socket_path(run_dir(96)).parent.parent == session.entry
        assert stats.socket_path(run_dir(95)) == run_dir(95) / stats.SOCKET


def test_a_socket_path_that_fits_nowhere_is_one_line_naming_it():
    """Outside a session (a config rendered alone) there is no short directory."""
    run_dir = Path("/nowhere") / ("x" * 100)
    with pytest.raises(UnsafePathError) as e:
        lab.socket_path(run_dir, "mariadb.sock", "mariadb")
    message = str(e.value)
    assert "\n" not in message and str(run_dir / "mariadb.sock") in message
    assert "122 bytes" in message and "107 bytes" in message and message.startswith("mariadb:")


@pytest.mark.parametrize("text, want", [
    ('listen = "/run/stacklab/12345-abcdef01/0a1b2c3d-php-fpm/php-fpm.sock"',
     'listen = "/var/lib/stacklab/php-fpm/php-fpm.sock"'),
    ("socket = /tmp/stacklab-run-1000/9-0123abcd/0a1b2c3d-mariadb/mariadb.sock",
     "socket = /var/lib/stacklab/mariadb/mariadb.sock"),
])
def test_exported_configs_are_cleaned_of_the_short_socket_directory(text, want):
    assert clean(text) == want


# Real servers under a long TMPDIR: MariaDB (and its seeding server) behind PHP-FPM; and
# HAProxy in front of two replicas with PHP-FPM (a replica cannot hold a database); Apache's
# mod_cgid; mod_fcgid, whose socket directory overflows, and which cuts PHPRC and
# PHP_INI_SCAN_DIR at 127 bytes (FcgidInitialEnv): PHP would run without the run's php.ini.
SPEC = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "long-tmpdir"
repetitions = 1
duration = "1s"
warmup = "0.3s"

[matrix]
stack = ["{stack}"]
workload = ["{workload}"]
concurrency = [4]
"""


@pytest.mark.integration
@pytest.mark.parametrize("long_tmpdir, stack, workload, sockets", [
    (LONG, "nginx+php-fpm+mariadb", "app-show", ("mariadb.sock", "php-fpm.sock")),
    (LONG, "haproxy > nginx+php-fpm * 2", "php-page", ("haproxy.sock", "php-fpm.sock")),
    (LONG, "apache+cgi", "php-page", ("cgid.sock",)),            # mod_cgid (event MPM)
    (LONG, "apache+fcgid", "php-page",                           # mod_fcgid's socket dir
     ("FcgidIPCDir", "FcgidInitialEnv PHPRC", "FcgidInitialEnv PHP_INI_SCAN_DIR")),
], ids=["mariadb", "haproxy", "cgid", "fcgid"], indirect=["long_tmpdir"])
def test_real_stacks_run_under_a_long_tmpdir(long_tmpdir, stack, workload, sockets):
    require_engine()
    spec, db = long_tmpdir.parent / "long.toml", long_tmpdir.parent / "r.db"
    spec.write_text(SPEC.format(stack=stack, workload=workload))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    outcome, verdicts, configs = sqlite3.connect(db).execute(
        "SELECT outcome, verdicts_json, configs_json FROM runs").fetchone()
    assert outcome == "ok", verdicts
    assert not [v for v in json.loads(verdicts) if v["status"] == "FAIL"], verdicts
    rendered = "".join(json.loads(configs).values())
    for sock in sockets:
        line = _line_of(rendered, sock)
        assert str(long_tmpdir) not in line and str(lab.default_registry()) in line, line
    assert not list((long_tmpdir / lab.name(lab.ROOT, uid=os.getuid())).glob("s-*"))


def _line_of(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)
