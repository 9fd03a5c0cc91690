"""A `starved` flag names its likely cause and the setting that would change it: the
components say, from their knobs, when their workers are fewer than the connections
(Component.starve_cause); `recommend` offers the setting."""

from __future__ import annotations

import pytest

from stacklab.stacks import COMPONENTS, starve_causes


def apache(**knobs):
    return {"apache": {k.name: k.default for k in COMPONENTS["apache"].knobs} | knobs}


def test_debians_event_mpm_starts_fewer_workers_than_64_connections():
    [why] = starve_causes(apache(), 64)
    assert "starts 2 children × 25 threads = 50 workers for 64 connections" in why
    assert "apache.start_servers = 3 (75 workers at start)" in why


@pytest.mark.parametrize("connections", [1, 16, 50])
def test_enough_workers_at_start_is_no_cause(connections):
    assert starve_causes(apache(), connections) == ()


def test_past_max_request_workers_the_limit_is_the_cause():
    [why] = starve_causes(apache(), 256)
    assert "at most 150 requests at once (apache.max_request_workers)" in why
    assert "set it to 256 or more" in why


def test_prefork_counts_processes():
    [why] = starve_causes(apache(mpm="prefork"), 8)
    assert "starts 5 processes for 8 connections" in why
    assert "apache.start_servers = 8" in why


def test_a_server_without_workers_to_count_says_nothing():
    nginx = {"nginx": {k.name: k.default for k in COMPONENTS["nginx"].knobs}}
    assert starve_causes(nginx, 4096) == ()
