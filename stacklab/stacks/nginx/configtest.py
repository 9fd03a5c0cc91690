"""nginx's own config test (`nginx -t`) of a user's include (nginx.include): the file alone
at spec time, then the run's whole config before the server starts."""

from __future__ import annotations

from pathlib import Path

from ..templates import quote
from ..userconf import UserFile, first_error, rendered_test

BINARY = "/usr/sbin/nginx"
INCLUDED = "include.conf"     # the user's file, copied into the run directory
# The server block's own directives that the include meets in every run, so that a
# duplicate of one is refused at spec time already (the run's test catches the rest).
WRAPPER = """pid {pid}; error_log {log};
events {{}}
http {{
    server {{
        listen 127.0.0.1:1;
        server_name localhost;
        root {root};
        index index.html;
        include {user};
    }}
}}
"""


def check_file(user: Path, scratch: Path) -> str | None:
    """nginx -t on the user's file inside a server block like the run's; its first error."""
    conf = scratch / "nginx.conf"
    conf.write_text(WRAPPER.format(pid=quote(scratch / "nginx.pid", "nginx"),
                                   root=quote(scratch, "nginx"),
                                   log=quote(scratch / "error.log", "nginx"),
                                   user=quote(user, "nginx")))
    return first_error(_argv(scratch, conf))


def check_run(user: UserFile, run_dir: Path) -> None:
    """nginx -t on the run's rendered config, before it starts (StackError)."""
    rendered_test(user, run_dir / INCLUDED, _argv(run_dir, run_dir / "nginx.conf"))


def _argv(prefix: Path, conf: Path) -> list[str]:
    return [BINARY, "-t", "-q", "-p", str(prefix), "-c", str(conf),
            "-e", str(prefix / "error.log")]
