"""Verify PHP through the stack's front: the intended SAPI, OPcache loaded and enabled as
the knobs say, APCu, and php.ini as rendered (Debian's production values, then knobs)."""

from __future__ import annotations

import json
from typing import Any

from ...host.net import Endpoint
from ...measure.verify import Status, Verdict, fetch
from .ini import SESSION_DIRS, expected_values, extra_values
from .probe import PROBE_PATH


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
    out.append(_check_opcache(knobs, persistent, first, second, third, pids))
    if second["apcu_enabled"] != knobs["apcu"]:
        out.append(Verdict("php", "apcu", Status.FAIL,
                           f"apcu_enabled is {second['apcu_enabled']}, knob says {knobs['apcu']}"))
    extra = extra_values(knobs["ini_extra"])
    ini, want = second["ini"], expected_values(knobs)
    wrong = [f"{k}={got!r} (rendered {want[k]})" for k, got in ini.items()
             if k in want and got is not False and not _same(got, want[k])]
    out.append(Verdict("php", "php.ini", Status.FAIL if wrong else Status.PASS,
                       ("not as rendered: " + ", ".join(wrong)) if wrong else
                       f"{len(second['extensions'])} extensions; {len(ini)} directives as "
                       "rendered (Debian's production values, "
                       + (f"{len(extra)} of php.ini_extra, " if extra else "")
                       + "then the knobs)",
                       {k: v for k, v in ini.items() if k.startswith("session.gc")}))
    if knobs["session_handler"] == "files" and "session.save_path" in ini:
        out.append(_check_session_dir(knobs, ini["session.save_path"]))
    return out


def _check_session_dir(knobs: dict[str, Any], path: str) -> Verdict:
    """File sessions in the directory php.session_dir names."""
    want = SESSION_DIRS[knobs["session_dir"]]
    ok = str(path).rstrip("/").endswith("/" + want)
    return Verdict("php", "session directory", Status.PASS if ok else Status.FAIL,
                   f"session.save_path {path}" + ("" if ok else f", expected …/{want}"))


def _check_opcache(knobs: dict[str, Any], persistent: bool, first: dict, second: dict,
                   third: dict, pids: set) -> Verdict:
    """Loaded exactly when php.opcache says, enabled exactly when opcache_enable says too,
    and hitting when it is on in a persistent process."""
    loaded, enabled = second.get("opcache_loaded"), second["opcache_enabled"]
    want_enabled = knobs["opcache"] and knobs["opcache_enable"]
    if loaded != knobs["opcache"]:
        return Verdict("php", "opcache", Status.FAIL, f"OPcache extension loaded is {loaded}, "
                       f"php.opcache says {knobs['opcache']}")
    if enabled != want_enabled:
        return Verdict("php", "opcache", Status.FAIL,
                       f"opcache_enabled is {enabled}, knobs say {want_enabled}")
    if enabled and persistent and third["opcache_hits"] <= first["opcache_hits"] \
            and len(pids) == 1:
        return Verdict("php", "opcache", Status.FAIL, "OPcache is on but never hits")
    if enabled and not persistent:
        return Verdict("php", "opcache", Status.WARN, "OPcache is on, but each request runs "
                       "in a new process: its cache never survives to hit")
    if enabled:
        return Verdict("php", "opcache", Status.PASS, f"enabled, {third['opcache_hits']} hits")
    return Verdict("php", "opcache", Status.PASS,
                   "loaded, opcache.enable = 0" if loaded else "not loaded")


def _same(got: Any, rendered: str) -> bool:
    """ini_get's string against the value written in php.ini (On/Off, quoted strings)."""
    rendered = rendered.strip('"')
    if rendered in ("On", "Off"):
        return _ini_bool(got) == (rendered == "On")
    return str(got) == rendered


def _ini_bool(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "on", "true", "yes")
