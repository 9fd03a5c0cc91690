"""The external server's knobs: where it is, what to ask, what to watch. They are set by
the experiment file's [external] section (spec.py) and recorded with every run, like any
component's knobs."""

from __future__ import annotations

import re
from typing import Any

from ...knobs import Knob
from .target import origin

COMPONENT = "external"
MAX_PATHS = 10_000
MAX_WEIGHT = 1_000_000
_UNIT = re.compile(r"[A-Za-z0-9:_.@-]+\.(service|scope|slice)")
CGROUP_ROOT = "/sys/fs/cgroup/"


def url_problem(value: str) -> str | None:
    try:
        origin(value)
    except ValueError as e:
        return f"{value!r}: {e}"
    return None


def path_problem(path: Any) -> str | None:
    """A request target: starts with '/', no whitespace or control characters, no
    fragment (what the engine sends as the request line's target)."""
    if not isinstance(path, str):
        return "expected a URL path such as '/about.html'"
    if not path.startswith("/"):
        return f"{path!r} does not start with '/'"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in path) or "#" in path:
        return f"{path!r} holds whitespace, a control character or a fragment"
    return None


def paths_problem(paths: list) -> str | None:
    if not paths:
        return "give at least one path"
    if len(paths) > MAX_PATHS:
        return f"at most {MAX_PATHS} paths"
    if len(set(map(str, paths))) != len(paths):
        return "paths repeat (give one a larger weight instead)"
    return None


def weight_problem(weight: Any) -> str | None:
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= MAX_WEIGHT:
        return f"a weight is an integer 1..{MAX_WEIGHT}, not {weight!r}"
    return None


def watch_problem(value: str) -> str | None:
    """'' (nothing), 'pid:N', 'cgroup:/sys/fs/cgroup/…' or 'unit:NAME.service'."""
    if value == "":
        return None
    kind, _, what = value.partition(":")
    if kind == "pid":
        return None if what.isdigit() and int(what) > 1 else (
            f"pid {what!r} is not a process id above 1")
    if kind == "cgroup":
        if not what.startswith(CGROUP_ROOT) or "/../" in f"{what}/" or "\0" in what:
            return f"cgroup {what!r} is not a directory under {CGROUP_ROOT}"
        return None
    if kind == "unit":
        return None if _UNIT.fullmatch(what) else (
            f"unit {what!r} is not a systemd unit name (e.g. nginx.service)")
    return ("expected { pid = N }, { cgroup = \"/sys/fs/cgroup/...\" } or "
            "{ unit = \"NAME.service\" }")


KNOBS = [
    Knob(COMPONENT, "url", str, "", "The server's origin, scheme://host:port/ (loopback "
         "unless --allow-remote on the command line); stacklab starts nothing there.",
         validate=url_problem),
    Knob(COMPONENT, "paths", list, ["/"], "The URL paths the load asks (each must answer "
         "200 before measuring).", validate=paths_problem, each=path_problem),
    Knob(COMPONENT, "weights", list, [], "Relative weight of each path, in their order "
         "(empty: every path 1).", each=weight_problem),
    Knob(COMPONENT, "watch", str, "", "The processes whose CPU and memory are recorded: "
         "'pid:N' (its process group), 'cgroup:/sys/fs/cgroup/...', 'unit:NAME.service' "
         "('': nothing; the report then says the server's figures are not known).",
         validate=watch_problem),
]
