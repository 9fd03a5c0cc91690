"""Several agents' engine reports as one report of the run, in the engine's own layout
(so every reader of a report — LoadReport, the flags, the store, the reports — takes it
as it takes one engine's), with what each agent did beside it under `agents`.

Exact where the engine gives what it takes: counts, bytes, statuses and errors add up,
and each latency whose histogram the report holds (the corrected latency always; time
to first byte and connect from schema 5 on) is the agents' histograms merged bucket for
bucket, its summary read from the merged histogram by the engine's own rank rule. What
no report holds whole is bounded and said so under `agents.approximate`: a latency
summary without a histogram takes the agents' highest percentiles (an upper bound) and
their pooled mean and standard deviation (exact); the time series' per-second
percentiles are the agents' highest; the per-connection figures' p1 and median come
from the agents' (the least p1, the slot-weighted median of medians).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

from ..analysis.stats import decode_histogram, values_at_percentiles
from ..errors import EngineError

SUMMARY_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
# Summaries and the histogram they are read from (schema 5's `histograms`; `histogram`
# is the corrected latency's, in every schema).
HISTOGRAMS = {"latency_us": ("histogram",), "ttfb_us": ("histograms", "ttfb"),
              "connect_us": ("histograms", "connect")}
# Summaries no report holds a histogram of: bounded from the agents'.
BOUNDED = ("latency_uncorrected_us", "tls_us")


def merge_reports(docs: Sequence[dict], agents: Sequence[dict[str, Any]]) -> dict:
    """One report from `docs` (agent k's report is docs[k]; `agents[k]` what is known of
    agent k besides: name, host, netns, address), in docs[0]'s schema, with `agents`."""
    if not docs or len(docs) != len(agents):
        raise ValueError(f"{len(docs)} reports for {len(agents)} agents")
    versions = {d["engine"]["version"] for d in docs}
    if len(versions) > 1:
        named = ", ".join(f"{a['name']} {d['engine']['version']}"
                          for a, d in zip(agents, docs))
        raise EngineError(f"the agents run different engine versions ({named}): their "
                          "figures would not be one measurement; install one version on "
                          "every load host")
    first = docs[0]
    merged: dict[str, Any] = {
        "schema_version": first["schema_version"],
        "config": _config(docs),
        "duration_s": max(d["duration_s"] for d in docs),
        "requests": _requests(docs),
        "status": _add(d.get("status") or {} for d in docs),
        "status_classes": _add(d.get("status_classes") or {} for d in docs),
        # the engine's own rule, completed over the measured phase: the agents' phases
        # overlap (they start together), so the longest is the union's
        "rps": round(sum(d["requests"]["completed"] for d in docs)
                     / max(max(d["duration_s"] for d in docs), 1e-9), 3)
        if len(docs) > 1 else first["rps"],
        "bytes": {k: _sum_or_none(d["bytes"].get(k) for d in docs) for k in first["bytes"]},
        "engine": {"version": first["engine"]["version"],
                   "cpu_user_s": round(sum(d["engine"]["cpu_user_s"] for d in docs), 6),
                   "cpu_sys_s": round(sum(d["engine"]["cpu_sys_s"] for d in docs), 6)},
        "interrupted": any(d.get("interrupted") for d in docs),
    }
    approximate: list[str] = []
    if len(docs) == 1:
        for key in (*HISTOGRAMS, "histogram", "histograms"):
            if key in first:
                merged[key] = first[key]
    else:
        for key, path in HISTOGRAMS.items():
            if key not in first:
                continue
            encoded = [_at(d, path) for d in docs]
            h = _merged_histogram(encoded)
            if path[0] in first:            # the merged histogram goes where each was
                if len(path) == 1:
                    merged[path[0]] = _encoded(h)
                else:
                    merged.setdefault(path[0], {})[path[1]] = _encoded(h)
            if all(encoded) or all(not _summary_count(d, key) for d in docs):
                merged[key] = _summary(h, docs, key)
            else:
                merged[key] = _bounded([d[key] for d in docs])
                approximate.append(f"{key}: the agents' highest percentiles (an upper "
                                   "bound), pooled mean and deviation")
    for key in BOUNDED:
        if key in first:
            merged[key] = first[key] if len(docs) == 1 else _bounded([d[key] for d in docs])
            if len(docs) > 1:
                approximate.append(f"{key}: the agents' highest percentiles (an upper "
                                   "bound), pooled mean and deviation")
    if "latency_percentiles_us" in first:
        merged["latency_percentiles_us"] = _percentile_list(docs, merged)
    if "protocol" in first:
        merged["protocol"] = _protocol(docs, agents)
    if "start" in first:
        merged["start"] = {k: min((d["start"][k] for d in docs
                                   if d["start"].get(k) is not None), default=None)
                           for k in first["start"]}
    if "tls" in first:
        merged["tls"] = _tls(docs)
    if "connections_opened" in first:
        merged["connections_opened"] = sum(d.get("connections_opened") or 0 for d in docs)
    if first.get("connections"):
        merged["connections"] = _slots([d["connections"] for d in docs])
        if len(docs) > 1:
            approximate.append("connections: requests per connection p1 the agents' least, "
                               "median and longest-wait median the slot-weighted median "
                               "of the agents'")
    if first.get("in_flight"):
        merged["in_flight"] = _in_flight([d["in_flight"] for d in docs])
        if len(docs) > 1:
            approximate.append("in_flight: age median the count-weighted median of the "
                               "agents'")
    if "timeseries" in first:
        merged["timeseries"] = _timeseries([d.get("timeseries") or [] for d in docs])
        if len(docs) > 1:
            approximate.append("timeseries: each second's percentiles the agents' highest")
    merged["agents"] = _agents(docs, agents, approximate)
    return merged


def _at(doc: dict, path: tuple[str, ...]) -> str | None:
    value: Any = doc
    for key in path:
        value = (value or {}).get(key) if isinstance(value, dict) else None
    return value or None


def _summary_count(doc: dict, key: str) -> int:
    return (doc.get(key) or {}).get("count") or 0


def _add(maps) -> dict:
    total: Counter = Counter()
    for m in maps:
        total.update(m)
    return dict(sorted(total.items()))


def _sum_or_none(values) -> int | None:
    values = list(values)
    return None if all(v is None for v in values) else sum(v or 0 for v in values)


def _protocol(docs: Sequence[dict], agents: Sequence[dict]) -> str | None:
    """What the responses came in, the same for every agent that completed any."""
    found = {a["name"]: d["protocol"] for a, d in zip(agents, docs) if d.get("protocol")}
    if len(set(found.values())) > 1:
        named = ", ".join(f"{n} {p}" for n, p in sorted(found.items()))
        raise EngineError(f"the agents' responses came in different protocols ({named})")
    return next(iter(found.values()), None)


def _config(docs: Sequence[dict]) -> dict:
    """docs[0]'s, with what the agents had between them: connections, threads, requests,
    a replay's schedule (the rate each was given is the run's whole rate, --segment's
    rule; each reports its own share of a schedule)."""
    config = dict(docs[0]["config"])
    config["connections"] = sum(d["config"]["connections"] for d in docs)
    config["threads"] = sum(d["config"].get("threads") or 1 for d in docs)
    if config.get("requests") is not None:
        config["requests"] = sum(d["config"].get("requests") or 0 for d in docs)
    if config.get("schedule"):
        config["schedule"] = dict(config["schedule"],
                                  requests=sum(d["config"]["schedule"]["requests"]
                                               for d in docs),
                                  span_s=max(d["config"]["schedule"]["span_s"] for d in docs))
    if "segment" in config:
        config["segment"] = None
    return config


def _requests(docs: Sequence[dict]) -> dict:
    out = {"completed": sum(d["requests"]["completed"] for d in docs),
           "failed": sum(d["requests"]["failed"] for d in docs)}
    if "retried" in docs[0]["requests"]:
        out["retried"] = sum(d["requests"].get("retried") or 0 for d in docs)
    out["errors"] = _add(d["requests"].get("errors") or {} for d in docs)
    return out


def _merged_histogram(encoded: list[str | None]):
    """The agents' histograms added bucket for bucket (those they hold), or None."""
    present = [e for e in encoded if e]
    if not present:
        return None
    h = decode_histogram(present[0])
    for e in present[1:]:
        h.add(decode_histogram(e))
    return h


def _encoded(h) -> str:
    if h is None:
        return ""
    out = h.encode()
    return out.decode() if isinstance(out, bytes) else out


def _summary(h, docs: Sequence[dict], key: str) -> dict:
    """A summary read from the merged histogram, as the engine reads its own."""
    if h is None or not h.get_total_count():
        return dict(docs[0][key])
    values = values_at_percentiles(h, list(SUMMARY_PERCENTILES.values()))
    out = {"count": h.get_total_count(),
           "min": min(d[key]["min"] for d in docs if d[key]["count"]),
           "mean": round(h.get_mean_value(), 3), "stdev": round(h.get_stddev(), 3)}
    out |= dict(zip(SUMMARY_PERCENTILES, values))
    out["max"] = max(d[key]["max"] for d in docs)
    return {k: out[k] for k in docs[0][key] if k in out}


def _bounded(summaries: list[dict]) -> dict:
    """Summaries merged without a histogram: counts add, min and max are exact, the
    mean and standard deviation pooled (exact), each percentile the highest of the
    agents' (an upper bound on the merged one)."""
    counted = [s for s in summaries if s.get("count")]
    if not counted:
        return dict(summaries[0])
    n = sum(s["count"] for s in counted)
    mean = sum(s["count"] * s["mean"] for s in counted) / n
    var = sum(s["count"] * (s["stdev"] ** 2 + (s["mean"] - mean) ** 2) for s in counted) / n
    out = {"count": n, "min": min(s["min"] for s in counted), "mean": round(mean, 3),
           "stdev": round(math.sqrt(var), 3), "max": max(s["max"] for s in counted)}
    out |= {p: max(s[p] for s in counted) for p in SUMMARY_PERCENTILES if p in counted[0]}
    return {k: out.get(k, summaries[0][k]) for k in summaries[0]}


def _percentile_list(docs: Sequence[dict], merged: dict) -> list[dict]:
    asked = [p["percentile"] for p in docs[0]["latency_percentiles_us"]]
    if len(docs) == 1:
        return docs[0]["latency_percentiles_us"]
    if not merged.get("histogram"):
        return [{"percentile": p, "value": 0} for p in asked]
    values = values_at_percentiles(decode_histogram(merged["histogram"]), asked)
    return [{"percentile": p, "value": v} for p, v in zip(asked, values)]


def _tls(docs: Sequence[dict]) -> dict:
    found = [d["tls"] for d in docs if d.get("tls") and d["tls"].get("protocol")]
    if not found:
        return docs[0]["tls"]
    out = dict(found[0])
    for key in ("handshakes", "resumed"):
        out[key] = _sum_or_none(t.get(key) for t in found)
    return out


def _weighted_median(pairs: list[tuple[float, int]]) -> float:
    """The median of values each held `weight` times."""
    pairs = sorted(pairs)
    half, seen = sum(w for _, w in pairs) / 2, 0
    for value, weight in pairs:
        seen += weight
        if seen >= half:
            return value
    return pairs[-1][0]


def _slots(slots: list[dict]) -> dict:
    weights = [s["slots"] for s in slots]
    per = [s["requests_per_slot"] for s in slots]
    wait = [s["longest_wait_us"] for s in slots]
    return {"slots": sum(weights),
            "requests_per_slot": {
                "min": min(p["min"] for p in per), "p1": min(p["p1"] for p in per),
                "median": _weighted_median([(p["median"], w) for p, w in zip(per, weights)]),
                "max": max(p["max"] for p in per)},
            "idle_slots": sum(s["idle_slots"] for s in slots),
            "longest_wait_us": {
                "median": _weighted_median([(x["median"], w) for x, w in zip(wait, weights)]),
                "max": max(x["max"] for x in wait)}}


def _in_flight(parts: list[dict]) -> dict:
    out = {"count": sum(p["count"] for p in parts),
           "age_us_max": max(p["age_us_max"] for p in parts),
           "older_than_run": sum(p["older_than_run"] for p in parts)}
    if "age_us_median" in parts[0]:
        out["age_us_median"] = _weighted_median([(p["age_us_median"], p["count"])
                                                 for p in parts])
    return {k: out[k] for k in parts[0]}


def _timeseries(series: list[list[dict]]) -> list[dict]:
    """Bucket by bucket (the agents start within milliseconds of each other): counts
    and bytes add up, each percentile the agents' highest, the mean weighted by the
    requests each agent completed (exact)."""
    buckets: dict[tuple[int, int], dict] = {}
    for one in series:
        for b in one:
            key = (b["t_s"], b.get("width_s") or 1)
            if key not in buckets:
                buckets[key] = dict(b)
                continue
            into = buckets[key]
            if "mean_us" in into:
                both = into["completed"] + b["completed"]
                into["mean_us"] = (into["mean_us"] * into["completed"] + b["mean_us"]
                                   * b["completed"]) / both if both else 0.0
            for k, v in b.items():
                if k in ("t_s", "width_s", "mean_us"):
                    continue
                into[k] = max(into[k], v) if k.endswith("_us") else into[k] + v
    return [buckets[k] for k in sorted(buckets)]


def _agents(docs: Sequence[dict], agents: Sequence[dict], approximate: list[str]) -> dict:
    """What each agent did, and how together they started."""
    per = []
    for doc, agent in zip(docs, agents):
        wall = (doc["duration_s"] or 0) + (doc["config"].get("warmup_s") or 0)
        cpu = doc["engine"]["cpu_user_s"] + doc["engine"]["cpu_sys_s"]
        threads = doc["config"].get("threads") or 1
        start = doc.get("start") or {}
        per.append({**agent,
                    "engine_version": doc["engine"]["version"],
                    "connections": doc["config"]["connections"],
                    "threads": threads,
                    "segment": doc["config"].get("segment"),
                    "completed": doc["requests"]["completed"],
                    "failed": doc["requests"]["failed"],
                    "rps": doc["rps"],
                    "wall_s": wall,
                    "cpu_s": round(cpu, 6),
                    "busy": round(cpu / (wall * threads), 4) if wall > 0 else None,
                    "latency_us": {k: doc["latency_us"][k] for k in ("p50", "p99", "max")},
                    "start_unix_us": start.get("unix_us"),
                    "asked_start_unix_us": start.get("asked_unix_us"),
                    "first_send_unix_us": start.get("first_send_unix_us")})
    starts = [a["start_unix_us"] for a in per if a["start_unix_us"] is not None]
    offsets = [a["clock_offset_us"] for a in per if a.get("clock_offset_us") is not None]
    return {"count": len(per), "per_agent": per,
            "start_skew_us": (max(starts) - min(starts)) if len(starts) == len(per) else None,
            # how far the agents' clocks disagree, by the scheduler's: their start times
            # are each by its own clock, so this much more skew they cannot show
            "clock_spread_us": (max(offsets) - min(offsets)) if len(offsets) == len(per)
            else None,
            "approximate": approximate}
