"""Reliability: nothing measured is lost, and what cannot be measured well is refused or
flagged. Each test reproduces one failure of the issue "Reliability" with real servers,
a real full disk, a real lock or a real signal."""

import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab import hostinfo
from stacklab.cli import cli
from stacklab.store import Store

from fakes import fake_experiment
from helpers import require_root


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def tmpfs(tmp_path):
    """mount(name, size) → a directory on a tmpfs of that size, unmounted afterwards."""
    require_root("mount a tmpfs")
    mounted = []

    def mount(name: str, size: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=755", "tmpfs",
                        str(path)], check=True)
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_git_commit_leaves_a_users_index_alone(tmp_path, monkeypatch):
    """`git status` refreshes .git/index when it can; run as root in a user's checkout it
    would leave a root-owned index behind."""
    require_root("chown a checkout to another user")
    repo = tmp_path / "checkout"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "f").write_text("a\n")
    subprocess.run([*git, "add", "f"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=repo, check=True)
    for path in [repo, *repo.rglob("*")]:
        os.lchown(path, 1000, 1000)
    index = repo / ".git" / "index"
    stat = index.stat()
    os.utime(repo / "f", ns=(stat.st_mtime_ns + 10**9, stat.st_mtime_ns + 10**9))
    # the user trusts their checkout, as root's git would after `safe.directory`
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "safe.directory")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "*")
    monkeypatch.setattr(hostinfo, "REPO", repo)
    assert hostinfo.git_commit() and not hostinfo.git_commit().endswith("-dirty")
    assert index.stat().st_uid == 1000


def test_a_read_only_database_can_be_read(tmpfs):
    """show and export only read: a database on a read-only filesystem (an archive, a
    snapshot) is read without being written, not called unusable."""
    results = tmpfs("results", "4m")
    db = results / "stacklab.db"
    fake_experiment(db, "ro", reps=1)
    subprocess.run(["mount", "-o", "remount,ro", str(results)], check=True)
    shown = invoke("show", "ro", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert "ro (experiment 1" in shown.output
    exported = invoke("export", "ro", "--format", "csv", "--db", db)
    assert exported.exit_code == 0, exported.output
    assert len(exported.output.strip().splitlines()) == 5
    assert sorted(p.name for p in results.iterdir()) == ["stacklab.db"]
