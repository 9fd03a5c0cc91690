"""Squid's verification FAILs, each produced by a real squid in front of a real nginx
whose config (or docroot) is not what its knobs say. Each detail must name what was
seen: a check that always said PASS, or only echoed its knob, fails here."""

import pytest

from stacklab.stacks.squid import Squid
from stacklab.stacks.squid.verify import VERIFY_PATH
from stacklab.measure.verify import CHECK_PATH, Status

from helpers import tamper
from test_squid import SQUID, start_squid, static_backend, stop_squid  # noqa: F401

pytestmark = pytest.mark.integration


def squid_verdicts(session, backend, **knobs) -> dict:
    deployed, nginx = backend
    started = start_squid(session, deployed.docroot, nginx.endpoint, **knobs)
    try:
        return {v.check: v for v in SQUID.verify(started, started)}
    finally:
        stop_squid(started)


def test_stacklab_paths_fail_when_squid_caches_them(session, static_backend, monkeypatch):
    """`cache deny stacklab` dropped: the second request of /_stacklab/ is a hit."""
    tamper(monkeypatch, "squid", "squid.conf", r"^cache deny stacklab$", "")
    verdicts = squid_verdicts(session, static_backend)
    v = verdicts["/_stacklab/ never cached"]
    assert v.status is Status.FAIL, v
    assert v.detail.startswith(f"second GET {CHECK_PATH}: 200, X-Cache: HIT"), v.detail
    assert (v.data["cache_hits"], v.data["cache_misses"]) == (1, 0)
    assert verdicts["cache hit"].status is Status.PASS


def test_cache_hit_fails_when_the_check_page_is_not_served(session, static_backend,
                                                            monkeypatch):
    """The stack does not place squid's check page: the backend answers 404, and the
    verdict says the page it asked for is not there rather than calling it a miss."""
    monkeypatch.setattr(Squid, "docroot_files", lambda self, docroot, knobs: {})
    v = squid_verdicts(session, static_backend)["cache hit"]
    assert v.status is Status.FAIL, v
    assert v.detail.startswith(f"second GET {VERIFY_PATH}: 404"), v.detail
    assert v.detail.endswith(": not squid's check page (placed in the docroot by the "
                             "stack while it runs)"), v.detail


def test_disk_cache_fails_when_nothing_is_written_to_it(session, static_backend,
                                                        monkeypatch):
    """squid.disk_cache_mb = 10, but the cache_dir is no-store: the page is a hit from
    memory, and nothing is ever swapped out."""
    tamper(monkeypatch, "squid", "squid.conf", r"^(cache_dir aufs .* 10 16 256)$",
           r"\1 no-store")
    verdicts = squid_verdicts(session, static_backend, disk_cache_mb=10)
    assert verdicts["cache hit"].status is Status.PASS, verdicts["cache hit"]
    v = verdicts["disk cache"]
    assert v.status is Status.FAIL, v
    assert v.detail == (f"{VERIFY_PATH} is cached but nothing was written to the 10 MB disk "
                        "cache within 2 s (swap.outs 0)")
    assert v.data == {"swap_outs": 0}
