"""Perl pages as capabilities (perl:cgi, perl:registry, perl:perlrun: Apache provides them
by its perl_handler), each with the probe placed in the stack's docroot and the verifier
that checks, through the stack's front, how Perl really runs: plain CGI, ModPerl::Registry
or ModPerl::PerlRun."""

from __future__ import annotations

import json

from ...host.net import Endpoint
from ...measure.verify import Status, Verdict, fetch
from ..base import Capability, Probe

PROBE_PATH = "/_stacklab/probe.pl"

# Reports how Perl really runs: mod_perl or not, the process, and whether the compiled
# script survives between requests (ModPerl::Registry keeps it; PerlRun and CGI do not).
PROBE = b"""#!/usr/bin/perl
use strict;
use warnings;
our $served;
$served++;
print "Content-Type: application/json\\r\\nCache-Control: no-store\\r\\n\\r\\n";
printf '{"mod_perl":"%s","pid":%d,"served":%d}', ($ENV{MOD_PERL} || ''), $$, $served;
"""


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


def perl_capability(mode: str, meaning: str) -> Capability:
    return Capability(f"perl:{mode}", meaning, (Probe(PROBE_PATH, PROBE, mode=0o755),),
                      lambda provider, front: verify_perl(front.endpoint, mode))


CAPABILITIES = {c.name: c for c in (
    perl_capability("cgi", "Perl pages by plain CGI: a new perl per request"),
    perl_capability("registry", "Perl pages by mod_perl's ModPerl::Registry: compiled once "
                    "per process"),
    perl_capability("perlrun", "Perl pages by mod_perl's ModPerl::PerlRun: compiled every "
                    "request"),
)}
