"""Render php.ini and conf.d (our own; the system's /etc/php is never read)."""

from __future__ import annotations

import json
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from ...errors import StackError
from .. import userconf
from ..base import Upstream, find_upstream
from ..templates import quote
from .debian import PRODUCTION

# Load order where it matters (Debian's priorities): these first, the rest by name.
_FIRST = ("opcache", "pdo", "mysqlnd", "xml", "igbinary", "msgpack")  # memcached needs both
_ZEND = ("opcache", "xdebug")
_OPT_IN = ("opcache", "apcu")    # loaded only when their knob says so
# The user's php.ini_extra, copied into conf.d, which every SAPI scans after php.ini (the
# handlers set PHP_INI_SCAN_DIR to it): read last, its values win; "zz-" sorts it last.
EXTRA = "conf.d/zz-ini_extra.ini"
EXTRA_KNOB = "php.ini_extra"


@lru_cache(maxsize=1)
def extension_dir() -> Path:
    out = subprocess.run(["php", "-n", "-r", "echo ini_get('extension_dir');"],
                         capture_output=True, text=True, timeout=10).stdout.strip()
    return Path(out or "/usr/lib/php/20220829")


def installed_extensions() -> list[str]:
    names = sorted(p.stem for p in extension_dir().glob("*.so"))
    return sorted(names, key=lambda n: (_FIRST.index(n) if n in _FIRST else len(_FIRST), n))


# What a backend needs even under extensions = "minimal": a MySQL database (mysqli, PDO),
# sessions in memcached (php-memcached).
DATABASE = "database:mysql"
SESSIONS = "sessions:memcached"
# php.session_dir -> the file sessions' directory under the run directory
SESSION_DIRS = {"run": "sessions", "nested": "var/lib/php/sessions"}
_FOR_DATABASE = ("mysqlnd", "mysqli", "pdo", "pdo_mysql")
_FOR_SESSIONS = ("igbinary", "msgpack", "memcached")


def _extension_lines(knobs: dict[str, Any], upstreams: tuple[Upstream, ...]) -> list[str]:
    wanted = [] if knobs["extensions"] == "minimal" else [
        n for n in installed_extensions() if n not in _OPT_IN]
    needed = [*(_FOR_DATABASE if find_upstream(upstreams, DATABASE) else ()),
              *(_FOR_SESSIONS if knobs["session_handler"] == "memcached" else ())]
    wanted += [n for n in needed if n not in wanted]
    if knobs["opcache"]:
        wanted.insert(0, "opcache")
    if knobs["apcu"]:
        wanted.append("apcu")
    available = set(installed_extensions())
    return [f"{'zend_extension' if n in _ZEND else 'extension'}={n}.so"
            for n in wanted if n in available]


def _backend_values(knobs: dict[str, Any], upstreams: tuple[Upstream, ...]) -> dict[str, str]:
    """The database socket and the session store, from the components started behind
    (found by what they provide, not by name)."""
    values = {}
    database = find_upstream(upstreams, DATABASE)
    if database is not None:
        sock = quote(database.unix, "ini")
        values.update({"mysqli.default_socket": sock, "pdo_mysql.default_socket": sock})
    if knobs["session_handler"] == "memcached":
        ep = find_upstream(upstreams, SESSIONS)
        if ep is None:
            raise StackError(f"php.session_handler = memcached needs a stack with memcached "
                             f"({SESSIONS}, e.g. nginx+php-fpm+memcached)")
        values.update({"session.save_handler": "memcached",
                       "session.save_path": f'"{ep.host}:{ep.port}"'})
    return values


def knob_values(knobs: dict[str, Any]) -> dict[str, str]:
    """php.ini as directive -> value: Debian's production file, then what the knobs say
    (without the paths and backends of one run: what a running PHP must report)."""
    return dict(PRODUCTION) | knob_directives(knobs)


def expected_values(knobs: dict[str, Any]) -> dict[str, str]:
    """What a running PHP must report: Debian's production values, then what the user's
    php.ini_extra sets, then the knobs — a user's line that changes what a knob sets is
    not what the knob says, and the verifier FAILs it (set that with the knob)."""
    return dict(PRODUCTION) | extra_values(knobs["ini_extra"]) | knob_directives(knobs)


def knob_directives(knobs: dict[str, Any]) -> dict[str, str]:
    """The directives the php.* knobs set, as php.ini writes them."""
    on = lambda v: "On" if v else "Off"  # noqa: E731
    return {
        "expose_php": on(knobs["expose_php"]),
        "register_argc_argv": on(knobs["register_argc_argv"]),
        "realpath_cache_size": f"{knobs['realpath_cache_size_kb']}K",
        "session.auto_start": "1" if knobs["session_auto_start"] else "0",
        "session.gc_probability": str(knobs["session_gc_probability"]),
        "zlib.output_compression": on(knobs["zlib_output_compression"]),
        "opcache.enable": "1" if knobs["opcache"] and knobs["opcache_enable"] else "0",
        "opcache.enable_cli": "0",
        "opcache.memory_consumption": str(knobs["opcache_memory_mb"]),
        "opcache.validate_timestamps": "1" if knobs["opcache_validate_timestamps"] else "0",
        "opcache.revalidate_freq": "2",
        "apc.enabled": "1" if knobs["apcu"] else "0",
    }


def ini_values(knobs: dict[str, Any], sessions: Path,
               upstreams: Iterable[Upstream] = ()) -> dict[str, str]:
    """Everything php.ini of one run says: knob_values, the session directory, backends."""
    values = knob_values(knobs)
    if knobs["session_handler"] == "files":
        values["session.save_path"] = quote(sessions, "ini")
    values.update(_backend_values(knobs, tuple(upstreams)))
    return values


def render_php_config(run_dir: Path, knobs: dict[str, Any],
                      upstreams: Iterable[Upstream] = ()) -> dict[str, str]:
    """Files (relative to run_dir): php.ini and conf.d/extensions.ini."""
    upstreams = tuple(upstreams)
    (run_dir / "conf.d").mkdir(parents=True, exist_ok=True)
    sessions = run_dir / SESSION_DIRS[knobs["session_dir"]]
    sessions.mkdir(parents=True, exist_ok=True)
    for d in (sessions, *sessions.parents):       # the server's user reaches and writes it
        if d == run_dir:
            break
        d.chmod(0o1777 if d == sessions else 0o755)
    ini = ("; Rendered by stacklab for one run; do not edit. Debian's php.ini-production "
           "values,\n; then the php.* knobs (stacklab/stacks/php/debian.py, ini.py).\n" +
           "".join(f"{key} = {value}\n"
                   for key, value in ini_values(knobs, sessions, upstreams).items()))
    files = {"php.ini": ini,
             "conf.d/extensions.ini": "\n".join(_extension_lines(knobs, upstreams)) + "\n"}
    if knobs["ini_extra"]:
        user = userconf.read(EXTRA_KNOB, knobs["ini_extra"])
        files[EXTRA] = user.header(";") + user.text
    return files


def check_extra(user: Path, scratch: Path) -> str | None:
    """PHP's own parse of the user's ini (`php -n -c FILE`): the first thing it says (a
    syntax error, an extension it cannot load), or None. PHP takes a directive it does
    not know without a word, so a misspelled name passes here and acts nowhere."""
    try:
        out = subprocess.run(["php", "-n", "-c", str(user), "-d", "display_startup_errors=1",
                              "-d", "display_errors=stderr", "-r", ""], capture_output=True,
                             text=True, timeout=userconf.TEST_TIMEOUT_S, cwd=scratch,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        return f"cannot run php: {e}"
    said = [line.strip() for line in (out.stderr + out.stdout).splitlines() if line.strip()]
    if said:
        return said[0]
    return None if out.returncode == 0 else f"php exited with {out.returncode}"


def extra_values(value: str) -> dict[str, str]:
    """What the user's ini sets (directive -> value as written), read by PHP's own parser
    (parse_ini_file, raw), for the verifier: those values are what a running PHP must
    report, not the knobs' ({} without one)."""
    if not value:
        return {}
    user = userconf.read(EXTRA_KNOB, value)
    out = subprocess.run(["php", "-n", "-r", "echo json_encode(parse_ini_file($argv[1], "
                          "false, INI_SCANNER_RAW));", str(user.path)], capture_output=True,
                         text=True, timeout=userconf.TEST_TIMEOUT_S, stdin=subprocess.DEVNULL)
    parsed = json.loads(out.stdout or "false")
    if not isinstance(parsed, dict):
        raise StackError(f"{EXTRA_KNOB}: {user.path}: PHP cannot parse it")
    return {str(k): str(v) for k, v in parsed.items() if not isinstance(v, (dict, list))}


def php_env(run_dir: Path) -> dict[str, str]:
    """Environment that makes any PHP SAPI read only our php.ini and conf.d."""
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PHPRC": str(run_dir / "php.ini"),
            "PHP_INI_SCAN_DIR": str(run_dir / "conf.d")}
