"""Every lab path is checked when the plan is made (issue 21): a lab root (TMPDIR) that
a later step would refuse, or that the servers cannot reach, is one line up front."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.host import lab
from stacklab.netlab.sweep import SWEEPS
from stacklab.cli import cli
from stacklab.errors import UnsafePathError
from stacklab.host.pathchars import UNSAFE
from stacklab.netlab import fscheck

from helpers import require_root


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def plain_dir():
    """A directory every user can search (pytest's tmp_path lies under a 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="labpaths-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _use_tmpdir(monkeypatch, path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(path))
    monkeypatch.setattr(tempfile, "tempdir", None)     # gettempdir() reads TMPDIR again


# 1. one list of unsafe characters -----------------------------------------------------

@pytest.mark.parametrize("bad", sorted(UNSAFE) + [" ", "\t", "\x1b"])
def test_the_lab_root_and_the_filesystem_layer_refuse_the_same_characters(plain_dir, bad):
    root = plain_dir / f"a{bad}b" / "stacklab-0"
    with pytest.raises(UnsafePathError, match="TMPDIR"):
        lab.check_root(root)
    with pytest.raises(ValueError):
        fscheck._check_path(root)


def test_a_lab_root_with_a_comma_is_refused_before_a_session_opens(plain_dir):
    """It used to open, store its runs, then raise ValueError when the session closed
    (fs.cleanup_stale refused the ',' the lab root had accepted)."""
    root = plain_dir / "a,b" / "stacklab-0"
    with pytest.raises(UnsafePathError) as e:
        lab.open_session(root, sweeps=SWEEPS)
    assert "','" in str(e.value) and "TMPDIR" in str(e.value)
    assert not root.exists()


def test_a_tmpdir_with_a_comma_is_one_line_and_exit_2(plain_dir, monkeypatch, tmp_path):
    hostile = plain_dir / "t,mp"
    hostile.mkdir(mode=0o755)
    _use_tmpdir(monkeypatch, hostile)
    result = invoke("run", "presets/quick.toml", "--db", tmp_path / "r.db")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "TMPDIR" in lines[0] and "','" in lines[0], lines
    assert not any(hostile.iterdir())
    assert not (tmp_path / "r.db").exists()


def test_a_plain_root_passes_and_opens(plain_dir):
    root = plain_dir / "stacklab-0"
    assert lab.check_root(root) == root
    lab.open_session(root, sweeps=SWEEPS).close()


# 3. a lab root the servers' user cannot search -----------------------------------------

def test_a_root_under_a_private_directory_is_refused_naming_it_its_mode_and_the_fix():
    require_root("the servers drop to www-data only as root")
    private = Path(tempfile.mkdtemp(dir="/tmp"))    # as `mktemp -d` makes it: 0700
    try:
        root = private / "stacklab-0"
        with pytest.raises(UnsafePathError) as e:
            lab.check_root(root)
        message = str(e.value)
        assert str(private) in message and "0700" in message and "TMPDIR" in message
        assert "chmod o+x" in message and "\n" not in message
        private.chmod(0o711)                        # searchable, not readable: enough
        assert lab.check_root(root) == root
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_a_tmpdir_made_by_mktemp_is_one_line_and_exit_2(monkeypatch, tmp_path):
    require_root("the servers drop to www-data only as root")
    private = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        _use_tmpdir(monkeypatch, private)
        result = invoke("run", "presets/quick.toml", "--db", tmp_path / "r.db")
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and str(private) in lines[0] and "0700" in lines[0], lines
        assert not any(private.iterdir())
        assert not (tmp_path / "r.db").exists()
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_a_directory_only_its_group_may_search_counts_for_a_member(plain_dir):
    """The owner, group and other bits are read as the kernel reads them."""
    st = os.stat(plain_dir)
    assert lab._can_search(st, None)
    if os.getuid() == 0:
        plain_dir.chmod(0o750)
        assert not lab._can_search(os.stat(plain_dir), "www-data")
        os.chown(plain_dir, 0, pwd.getpwnam("www-data").pw_gid)
        assert lab._can_search(os.stat(plain_dir), "www-data")
