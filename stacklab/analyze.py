"""Analyze: per-trial statistics over repetitions, and comparisons between trials.

Throughput and resource figures: median with a bootstrap 95% CI over repetitions.
Latency percentiles: from the runs' merged HdrHistograms, never averaged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .stats import Comparison, bootstrap_ci, compare, median, merged_percentiles
from .store import RunRecord, Store


@dataclass(frozen=True)
class Estimate:
    median: float | None
    ci: tuple[float, float] | None
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: list[float]) -> "Estimate":
        return cls(median(values), bootstrap_ci(values), tuple(values))

    @property
    def ci_level(self) -> float | None:
        """The interval's real confidence. With n < 6 the bootstrap interval of a median
        is [min, max], which covers the true median with probability 1 - 2^(1-n) only
        (75% at n = 3, 94% at n = 5), so that is what it is called."""
        n = len(self.values)
        if n < 2:
            return None
        return 0.95 if n >= 6 else 1 - 2 ** (1 - n)

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None

    @property
    def half_width(self) -> float | None:
        """CI half-width relative to the median (0.03 = ±3%)."""
        if not self.ci or not self.median:
            return None
        return (self.ci[1] - self.ci[0]) / 2 / self.median


@dataclass(frozen=True)
class TrialSummary:
    trial_id: str
    label: str
    stack: str
    workload: str
    concurrency: int
    knobs: dict[str, Any]
    runs_ok: int
    runs_failed: int                      # failed or invalid
    rps: Estimate
    mbps: Estimate                        # transfer rate, MB/s on the wire
    latency_us: dict | None               # pooled p50/p90/p99/p999/max from merged histograms
    latency_runs_us: dict[str, Estimate]  # p50/p99 per run: their spread over repetitions
    cpu_us_per_request: dict[str, Estimate]   # component -> server CPU per request
    engine_cpu_us_per_request: Estimate
    rss_mib_peak: dict[str, Estimate]         # component -> peak RSS
    pss_mib_per_worker: dict[str, Estimate]   # component -> PSS of one worker process
    errors: int                           # failed requests over all ok runs
    flagged: tuple[str, ...]              # run flags seen (generator-bound, …)
    reasons: tuple[str, ...]              # why runs failed
    verdicts: tuple[dict, ...] = field(default=())   # of the latest run

    @property
    def rps_median(self) -> float | None:
        return self.rps.median

    @property
    def p50_us(self) -> float | None:
        return self.latency_us["p50"] if self.latency_us else None

    @property
    def p99_us(self) -> float | None:
        return self.latency_us["p99"] if self.latency_us else None

    @property
    def server_cpu_us(self) -> float | None:
        """All server components' CPU per request (median over repetitions)."""
        values = [sum(v) for v in zip(*(e.values for e in self.cpu_us_per_request.values()))]
        return median(values)


@dataclass(frozen=True)
class ExperimentView:
    """Everything a report shows: the experiment row, trials, summaries and runs."""

    id: int
    name: str
    description: str
    created_at: str
    status: str
    host: dict
    commit: str | None
    versions: dict[str, str]
    summaries: list[TrialSummary]
    runs: list[RunRecord]


def engine_cpu_measured_s(load: dict) -> float:
    """The engine's CPU during the measured phase. It reports its whole process (warm-up
    included), so the warm-up's share is taken out in proportion to time."""
    total = load["engine"]["cpu_user_s"] + load["engine"]["cpu_sys_s"]
    measured, warmup = load["duration_s"], load["config"].get("warmup_s") or 0.0
    return total * measured / (measured + warmup) if measured + warmup > 0 else total


def _per_request(cpu_s: float, run: RunRecord) -> float:
    return cpu_s / run.load["requests"]["completed"] * 1e6


def _components(runs: list[RunRecord]) -> list[str]:
    return sorted({c for r in runs for c in r.resources if not c.startswith("_")})


def summarize(definition: dict, label: str, trial_id: str,
              runs: list[RunRecord]) -> TrialSummary:
    ok = [r for r in runs if r.outcome == "ok" and r.load and r.load["requests"]["completed"]]
    comps = _components(ok)

    def per_component(key: str, per_request: bool = False) -> dict[str, Estimate]:
        out = {}
        for c in comps:
            vals = [r.resources[c][key] for r in ok if r.resources.get(c, {}).get(key) is not None]
            if per_request:
                vals = [_per_request(r.resources[c][key], r) for r in ok if c in r.resources]
            if vals:
                out[c] = Estimate.of(vals)
        return out

    return TrialSummary(
        trial_id, label, definition["stack"], definition["workload"],
        definition["concurrency"], definition["knobs"], len(ok), len(runs) - len(ok),
        Estimate.of([r.load["rps"] for r in ok]),
        Estimate.of([r.load["bytes"]["total"] / r.load["duration_s"] / 1e6 for r in ok
                     if r.load["duration_s"]]),
        merged_percentiles([r.load["histogram"] for r in ok if r.load.get("histogram")]),
        {p: Estimate.of([r.load["latency_us"][p] for r in ok]) for p in ("p50", "p99")},
        per_component("cpu_s", per_request=True),
        Estimate.of([_per_request(engine_cpu_measured_s(r.load), r) for r in ok]),
        per_component("rss_mib_peak"), per_component("pss_mib_per_worker"),
        sum(r.load["requests"]["failed"] for r in ok),
        tuple(sorted({f for r in ok for f in r.flags})),
        tuple(sorted({r.reason for r in runs if r.outcome != "ok" and r.reason})),
        tuple(runs[-1].verdicts) if runs else ())


def load_view(store: Store, experiment: str | int | None) -> ExperimentView:
    row = store.experiment(experiment)
    runs = list(store.runs(row["id"]))
    by_trial: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_trial.setdefault(r.trial_id, []).append(r)
    summaries = [summarize(json.loads(t["definition_json"]), t["label"], t["trial_id"],
                           by_trial.get(t["trial_id"], []))
                 for t in store.trials(row["id"])]
    versions = runs[-1].versions if runs else {}
    spec = json.loads(row["spec_json"])
    return ExperimentView(row["id"], row["name"], spec["experiment"].get("description", ""),
                          row["created_at"], row["status"], json.loads(row["host_json"]),
                          row["stacklab_commit"], versions, summaries, runs)


def compare_trials(a: TrialSummary, b: TrialSummary) -> list[tuple[str, Comparison]]:
    """B against A on every metric both have, benchstat style."""
    rows = [("req/s", compare(a.rps.values, b.rps.values)),
            ("MB/s", compare(a.mbps.values, b.mbps.values)),
            ("engine CPU µs/req", compare(a.engine_cpu_us_per_request.values,
                                          b.engine_cpu_us_per_request.values))]
    for c in sorted(set(a.cpu_us_per_request) & set(b.cpu_us_per_request)):
        rows.append((f"{c} CPU µs/req", compare(a.cpu_us_per_request[c].values,
                                                b.cpu_us_per_request[c].values)))
    for c in sorted(set(a.rss_mib_peak) & set(b.rss_mib_peak)):
        rows.append((f"{c} RSS MiB", compare(a.rss_mib_peak[c].values,
                                             b.rss_mib_peak[c].values)))
    return rows


def rel_spread(e: Estimate) -> float | None:
    if not e.values or not e.median:
        return None
    return (max(e.values) - min(e.values)) / e.median
