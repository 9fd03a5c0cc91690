"""lighttpd, mini_httpd and webfsd on loopback: start from our configs, verify, serve,
stop, no leftovers; their rendered configs against golden files."""

import os
from pathlib import Path

import pytest

from stacklab.stacks import COMPONENTS, STACKS
from stacklab.stacks.base import RenderContext
from stacklab.verify import Status

from helpers import ROOT
from test_stacks import assert_all_pass, knobs_for, statuses
from test_stacks import run_stack as _run_stack
from test_stacks import session  # noqa: F401 (the fixture)

pytestmark = pytest.mark.integration
GOLDEN = ROOT / "tests" / "golden"
BINARIES = ("lighttpd", "mini_httpd", "webfsd")


def lab_processes(run_dir_marker: str = "") -> list[str]:
    """Command lines of lighttpd/mini_httpd/webfsd processes started from the lab dir
    (helpers.server_processes only knows nginx and apache2)."""
    from stacklab.lab import default_root
    lab_root = str(default_root())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if exe in BINARIES and (lab_root in cmdline or cwd.startswith(lab_root)):
            found.append(cmdline)
    return found


def run_stack(session, stack, workload="static-page", run_as=None, **overrides):
    verdicts = _run_stack(session, stack, workload, run_as, **overrides)
    assert lab_processes() == []
    return verdicts


def verdict(verdicts, check):
    return next(v for v in verdicts if v.check == check)


@pytest.mark.parametrize("stack", ["lighttpd"])
@pytest.mark.parametrize("as_nobody", [False, True], ids=["as-root-or-self", "as-nobody"])
def test_small_servers_start_verify_serve_stop(session, stack, as_nobody):
    if as_nobody and os.getuid() != 0:
        pytest.skip("already running as a normal user: the other case covers it")
    verdicts = run_stack(session, stack, run_as="nobody" if as_nobody else None)
    assert_all_pass(verdicts)
    assert statuses(verdicts)["stack:content /index.html"] == "PASS"
