"""Verify Perl through the stack's front: plain CGI, ModPerl::Registry or ModPerl::PerlRun."""

from __future__ import annotations

import json

from ..net import Endpoint
from ..verify import Status, Verdict, fetch

PROBE_PATH = "/_stacklab/probe.pl"


def verify_perl(front: Endpoint, mode: str) -> list[Verdict]:
    """mode: cgi (a new perl per request), registry (compiled once, kept in the Apache
    process), perlrun (inside Apache, but compiled afresh for every request)."""
    try:
        probes = []
        for _ in range(4):
            resp = fetch(front, PROBE_PATH)
            if resp.status != 200:
                raise ValueError(f"status {resp.status}")
            probes.append(json.loads(resp.body))
    except (OSError, ValueError) as e:
        return [Verdict("perl", "probe", Status.FAIL, f"Perl probe failed: {e}")]
    in_apache = all(p["mod_perl"] for p in probes)
    pids = {p["pid"] for p in probes}
    kept = any(p["served"] > 1 for p in probes)
    if mode == "cgi":
        ok = not in_apache and len(pids) == len(probes) and not kept
        seen = f"MOD_PERL unset, {len(pids)} processes for {len(probes)} requests"
    elif mode == "registry":
        ok = in_apache and (kept or len(pids) == len(probes))
        seen = f"{probes[0]['mod_perl'] or 'no mod_perl'}, script state kept: {kept}"
    else:
        ok = in_apache and not kept
        seen = f"{probes[0]['mod_perl'] or 'no mod_perl'}, recompiled each request: {not kept}"
    return [Verdict("perl", f"handler {mode}", Status.PASS if ok else Status.FAIL, seen)]
