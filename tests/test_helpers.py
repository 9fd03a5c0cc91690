"""The tests' own helpers keep their promises."""

import os

import pytest

from helpers import require_root


def test_a_test_that_needs_root_fails_instead_of_skipping(monkeypatch):
    """Not root: a failure naming what needs root, never a skip (a runner without root would
    skip the lab's own layers — namespaces, mounts, cgroups — and still pass)."""
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    with pytest.raises(pytest.fail.Exception, match=r"needs root \(mounting\)"):
        require_root("mounting")
