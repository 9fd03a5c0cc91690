"""Verify PHP through the stack's front: the intended SAPI, OPcache and APCu really on/off."""

from __future__ import annotations

import json
from typing import Any

from ...net import Endpoint
from ...verify import Status, Verdict, fetch

PROBE_PATH = "/_stacklab/probe.php"


def probe(front: Endpoint) -> dict:
    resp = fetch(front, PROBE_PATH)
    if resp.status != 200:
        raise ValueError(f"probe {PROBE_PATH}: status {resp.status}")
    return json.loads(resp.decoded())


def verify_php(front: Endpoint, knobs: dict[str, Any], sapi: str,
               persistent: bool) -> list[Verdict]:
    """`sapi`: PHP_SAPI the handler must report; `persistent`: whether PHP processes
    outlive a request (false for plain CGI, where OPcache cannot hit)."""
    try:
        first, second, third = probe(front), probe(front), probe(front)
    except (OSError, ValueError) as e:
        return [Verdict("php", "probe", Status.FAIL, f"PHP probe failed: {e}")]
    out = []
    if first["sapi"] == sapi:
        out.append(Verdict("php", "sapi", Status.PASS, f"PHP_SAPI {sapi}"))
    else:
        out.append(Verdict("php", "sapi", Status.FAIL,
                           f"PHP_SAPI is {first['sapi']}, expected {sapi}"))
    pids = {first["pid"], second["pid"], third["pid"]}
    if not persistent and len(pids) < 3:
        out.append(Verdict("php", "process per request", Status.FAIL,
                           f"expected a new PHP process per request, saw pids {sorted(pids)}"))
    enabled = second["opcache_enabled"]
    if enabled != knobs["opcache"]:
        out.append(Verdict("php", "opcache", Status.FAIL,
                           f"opcache_enabled is {enabled}, knob says {knobs['opcache']}"))
    elif enabled and persistent and third["opcache_hits"] <= first["opcache_hits"] \
            and len(pids) == 1:
        out.append(Verdict("php", "opcache", Status.FAIL, "OPcache is on but never hits"))
    elif enabled and not persistent:
        out.append(Verdict("php", "opcache", Status.WARN, "OPcache is on, but each request "
                           "runs in a new process: its cache never survives to hit"))
    else:
        out.append(Verdict("php", "opcache", Status.PASS,
                           f"enabled, {third['opcache_hits']} hits" if enabled else "off"))
    if second["apcu_enabled"] != knobs["apcu"]:
        out.append(Verdict("php", "apcu", Status.FAIL,
                           f"apcu_enabled is {second['apcu_enabled']}, knob says {knobs['apcu']}"))
    ini = second["ini"]
    wrong = [f"{k}={ini[k]!r}" for k, want in (
        ("expose_php", knobs["expose_php"]),
        ("register_argc_argv", knobs["register_argc_argv"]),
        ("session.auto_start", knobs["session_auto_start"]),
        ("zlib.output_compression", knobs["zlib_output_compression"]))
        if _ini_bool(ini[k]) != want]
    out.append(Verdict("php", "php.ini", Status.FAIL if wrong else Status.PASS,
                       ("not as the knobs say: " + ", ".join(wrong)) if wrong else
                       f"{len(second['extensions'])} extensions, ini as the knobs say"))
    return out


def _ini_bool(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "on", "true", "yes")
