"""Apache's own config test (`apache2 -t`) of a user's include (apache.include): the file
alone at spec time, under the modules every run loads, then the run's whole config (its
MPM, its handler's modules) before the server starts."""

from __future__ import annotations

from pathlib import Path

from ..templates import quote
from ..userconf import UserFile, first_error, rendered_test

BINARY = "/usr/sbin/apache2"
MODULES = Path("/usr/lib/apache2/modules")
INCLUDED = "include.conf"     # the user's file, copied into the run directory
# Always needed by our config (the run's too: adapter.py loads them).
BASE_MODULES = ("authz_core", "authz_host", "dir", "mime", "status")
# Debian's default enabled set (a2enmod state of a fresh apache2 package), besides.
DEBIAN_MODULES = ("access_compat", "alias", "auth_basic", "authn_core", "authn_file",
                  "authz_user", "autoindex", "deflate", "env", "filter", "negotiation",
                  "reqtimeout", "setenvif")
# Apache says where on its first line (AH00526: Syntax error on line 1 of …:) and what
# on the next (Invalid command 'Foo', …).
LINES = 2


def check_file(user: Path, scratch: Path) -> str | None:
    """apache2 -t on the user's file after a minimal server with the modules a run with
    Debian's set loads whatever its handler (a LoadModule of the user's own is fine)."""
    modules = tuple(dict.fromkeys(BASE_MODULES + DEBIAN_MODULES))
    conf = scratch / "httpd.conf"
    conf.write_text("".join([
        f"ServerRoot {quote(scratch, 'apache')}\nServerName localhost\n"
        "Listen 127.0.0.1:1\n",
        f"PidFile {quote(scratch / 'httpd.pid', 'apache')}\n",
        f"ErrorLog {quote(scratch / 'error.log', 'apache')}\n",
        f"DefaultRuntimeDir {quote(scratch, 'apache')}\n",
        f"LoadModule mpm_event_module {quote(MODULES / 'mod_mpm_event.so', 'apache')}\n",
        *(f"LoadModule {m}_module {quote(MODULES / f'mod_{m}.so', 'apache')}\n"
          for m in modules),
        f"Include {quote(user, 'apache')}\n"]))
    return first_error([BINARY, "-t", "-f", str(conf)], LINES)


def check_run(user: UserFile, run_dir: Path, env: dict[str, str] | None) -> None:
    """apache2 -t on the run's rendered config, before it starts (StackError)."""
    rendered_test(user, run_dir / INCLUDED, [BINARY, "-t", "-f", str(run_dir / "httpd.conf")],
                  LINES, env)
