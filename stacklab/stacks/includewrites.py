"""What a file of the user's directives may write: only inside the run directory.

stacklab runs its servers, and their config tests, as root. A user's `error_log
/var/log/x.log;` in nginx.include would create that file outside the lab at the spec's
config test already (even under --dry-run), and an `ErrorLog "|cmd"` in apache.include
would run a command. So before any server or config test sees the file, each directive
that names a file or directory the server writes (logs, pid and lock files, temporary
and cache directories, stores) is read off the user's text, and its path must be
relative without `..` — the server's prefix is the run directory (nginx -p, Apache's
ServerRoot), so the file lands there — or a sink that writes no file (off, /dev/null,
stderr, syslog). A pipe, an absolute path, a `..` or a variable in such a path is refused
naming the line; an `include` of another file is refused too, since what it holds is not
read here. Everything else in the file is the server's to judge (its config test).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

# (line number, directive, the path at fault, why) of the first write refused, or None
Finding = tuple[int, str, str, str]
Scanner = Callable[[str], "Finding | None"]

SINKS = {"off", "/dev/null", "stderr", "/dev/stderr", "none"}
# A cache's size after its path (SSLSessionCache shmcb:/path(512000)): only digits.
_SIZE = re.compile(r"\(\d+\)$")
# nginx's and Apache's whitespace between words: exactly these (a vertical tab or a
# no-break space is part of a word to them, so it must be to the scanner)
_SPACE = " \t\r\n"
# A mechanism or cache type before the path (Apache's Mutex file:/dir, SSLSessionCache
# shmcb:/path(512000), nginx's error_log memory:32m and syslog:server=…).
_PREFIX = re.compile(r"^(file|fcntl|flock|posixsem|sysvsem|pthread|default|shmcb|shmht|"
                     r"dbm|dc|memcache|redis|memory|syslog):", re.I)

NGINX_WRITES = frozenset({
    "access_log", "error_log", "pid", "lock_file", "working_directory",
    "client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path", "uwsgi_temp_path",
    "scgi_temp_path", "proxy_cache_path", "fastcgi_cache_path", "uwsgi_cache_path",
    "scgi_cache_path", "proxy_store", "fastcgi_store", "uwsgi_store", "scgi_store"})
APACHE_WRITES = frozenset(d.lower() for d in (
    "ErrorLog", "CustomLog", "TransferLog", "GlobalLog", "ForensicLog", "ScriptLog",
    "PidFile", "Mutex", "CoreDumpDirectory", "CacheRoot", "DavLockDB", "ScoreBoardFile",
    "DefaultRuntimeDir", "SSLSessionCache", "SSLStaplingCache", "BufferedLogs",
    "ScriptSock"))
INCLUDES = frozenset({"include", "includeoptional"})
PHP_WRITES = frozenset({
    "error_log", "session.save_path", "opcache.file_cache", "opcache.error_log",
    "opcache.lockfile_path", "upload_tmp_dir", "sys_temp_dir", "mail.log"})
MARIADB_WRITES = frozenset(k.replace("-", "_") for k in (
    "log_error", "general_log_file", "slow_query_log_file", "pid_file", "socket",
    "datadir", "tmpdir", "log_bin", "log_bin_index", "relay_log", "relay_log_index",
    "innodb_data_home_dir", "innodb_log_group_home_dir", "innodb_undo_directory",
    "innodb_tmpdir", "aria_log_dir_path", "log_basename", "secure_file_priv",
    "log_slow_query_file"))


def path_problem(value: str) -> str | None:
    """Why a path a directive writes to leaves the run directory, or None."""
    if value.startswith("|"):
        return "a piped log runs a command: refused"
    if value.lower() in SINKS or value.lower() == "syslog" or value.lower().startswith(
            "syslog:"):
        return None
    path = _SIZE.sub("", _PREFIX.sub("", value))
    if "$" in path or "%{" in path:
        return "a variable in a path written to could name any file: refused"
    if path.startswith("/") or path.startswith("~"):
        return "an absolute path writes outside the run directory"
    if ".." in path.split("/"):
        return "'..' leads out of the run directory"
    return None


def nginx(text: str) -> Finding | None:
    """The first nginx directive of `text` that writes outside the run directory."""
    for line, words in _nginx_statements(text):
        name = words[0].lower()
        if name == "include":
            return line, words[0], " ".join(words[1:]), _INCLUDE_WHY
        if name in NGINX_WRITES and len(words) > 1:
            value = words[1]
            if name.endswith("_store") and value.lower() in ("on", "off"):
                continue
            if why := path_problem(value):
                return line, words[0], value, why
    return None


def apache(text: str) -> Finding | None:
    """The first Apache directive of `text` that writes outside the run directory."""
    for line, words in _apache_lines(text):
        name = words[0].lower()
        if name in INCLUDES:
            return line, words[0], " ".join(words[1:]), _INCLUDE_WHY
        if name not in APACHE_WRITES:
            continue
        for value in words[1:2] if name != "mutex" else words[1:]:
            if why := path_problem(value):
                return line, words[0], value, why
    return None


def ini(keys: frozenset[str]) -> Scanner:
    """A scanner of `key = value` lines (php.ini, my.cnf) for the keys that write."""
    def scan(text: str) -> Finding | None:
        for number, raw in enumerate(text.splitlines(), 1):
            if raw.strip().lower().startswith(("!include", "!includedir")):
                return number, raw.split()[0], " ".join(raw.split()[1:]), _INCLUDE_WHY
            key, eq, value = raw.strip().partition("=")
            key = key.strip().lower().replace("-", "_").removeprefix("loose_")
            # MariaDB takes an unambiguous prefix of an option's name for the name
            if not eq or key.startswith((";", "#", "[")) or not any(
                    k == key or (len(key) >= 3 and k.startswith(key)) for k in keys):
                continue
            value = value.split(";" if not key.startswith("innodb") else "#", 1)[0]
            value = value.strip().strip("\"'")
            if value and (why := path_problem(value)):
                return number, key, value, why
        return None
    return scan


_INCLUDE_WHY = "an include of another file is not read here: put its lines in this file"


def _nginx_statements(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line, words) of each directive, with quotes and comments read as nginx reads
    them; a block's opening directive (`location /x {`) is a statement too."""
    words: list[str] = []
    start = 1
    for token, at in _tokens(text, "#", ";{}"):
        if token in (";", "{", "}"):
            if words:
                yield start, words
            words = []
            continue
        if not words:
            start = at
        words.append(token)
    if words:
        yield start, words


def _apache_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line, words) of each directive line (a continued line joined, numbered by its
    first), sections' <…> lines and comments left out."""
    held, first = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not held:
            first = number
        if raw.endswith("\\"):
            held += raw[:-1] + " "
            continue
        stripped, held = (held + raw).strip(), ""
        if stripped and not stripped.startswith(("#", "<")):
            if words := [t for t, _ in _tokens(stripped, None, "")]:
                yield first, words


def _tokens(text: str, comment: str | None, single: str) -> Iterator[tuple[str, int]]:
    """Words of a config text (quoted ones unquoted, backslash escapes kept as the
    escaped character) with the line each starts on; each character of `single` is a
    word of its own; from `comment` to the end of the line is skipped."""
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in _SPACE:
            i += 1
        elif comment and c == comment:
            while i < n and text[i] != "\n":
                i += 1
        elif c in single:
            yield c, line
            i += 1
        elif c in "\"'":
            start, word, i = line, [], i + 1
            while i < n and text[i] != c:
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                line += text[i] == "\n"
                word.append(text[i])
                i += 1
            i += 1
            yield "".join(word), start
        else:
            start, word = line, []
            while i < n and text[i] not in _SPACE and text[i] not in single and not (
                    comment and text[i] == comment and not word):
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                word.append(text[i])
                i += 1
            yield "".join(word), start
