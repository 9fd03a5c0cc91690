"""Reliability: nothing measured is lost, and what cannot be measured well is refused or
flagged. Each test reproduces one failure of the issue "Reliability" with real servers,
a real full disk, a real lock or a real signal."""

import os
import subprocess
from pathlib import Path

import pytest

from stacklab import hostinfo

from helpers import require_root


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
