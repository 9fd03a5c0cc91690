"""The OpenMetrics export: an experiment's trial summaries in the OpenMetrics text format
(Prometheus' exposition format), for a metrics store or a dashboard.

One series per trial (and per component or error class where the metric has one),
labelled by experiment, trial, stack, workload, concurrency and the trial's knobs
(`nginx.worker_processes` → `knob_nginx_worker_processes`). Figures are the trial's
summary (analyze.TrialSummary: medians over its successful runs, latency quantiles from
their merged histograms) in base units: seconds, bytes."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

from ..analysis.analyze import ExperimentView, TrialSummary, _components
from ..analysis.stats import median
from ..store import Outcome, RunRecord
from .export import error_classes, knob_names, knob_text

MIB = 2 ** 20
QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"), ("0.999", "p999"))

# (sample name suffix, labels beyond the trial's, value)
Sample = tuple[str, dict[str, str], float]


@dataclass(frozen=True)
class Trial:
    """What a family's samples are read from: the summary and its stored runs."""

    summary: TrialSummary
    runs: list[RunRecord]
    error_classes: tuple[str, ...]

    @property
    def ok(self) -> list[RunRecord]:
        return [r for r in self.runs if r.outcome is Outcome.OK and r.load]


@dataclass(frozen=True)
class Family:
    """One metric family: its metadata and how a trial's samples are found."""

    name: str
    type: str               # gauge | counter | summary
    unit: str | None        # the name's last part, when it is a base unit
    help: str
    samples: Callable[[Trial], Iterator[Sample]]


def _one(value: float | None, scale: float = 1.0) -> Iterator[Sample]:
    if value is not None:
        yield "", {}, value * scale


def _latency(t: Trial) -> Iterator[Sample]:
    lat = t.summary.latency_us
    if not lat:
        return
    for quantile, key in QUANTILES:
        if lat.get(key) is not None:
            yield "", {"quantile": quantile}, lat[key] / 1e6
    yield "_count", {}, lat["count"]


def _errors(t: Trial) -> Iterator[Sample]:
    if not t.ok:
        return
    errors = Counter()
    for r in t.ok:
        errors.update(r.load.errors)
    for e in t.error_classes:
        yield "_total", {"class": e}, errors[e]


def _per_component(attr: str, scale: float) -> Callable[[Trial], Iterator[Sample]]:
    def samples(t: Trial) -> Iterator[Sample]:
        for c, est in sorted(getattr(t.summary, attr).items()):
            if est.median is not None:
                yield "", {"component": c}, est.median * scale
    return samples


def _idle_rss(t: Trial) -> Iterator[Sample]:
    for c in _components(t.ok):
        idle = median([v for r in t.ok
                       if (v := r.resources.figure(c, "rss_mib_idle_before")) is not None])
        if idle is not None:
            yield "", {"component": c}, idle * MIB


def _runs(t: Trial) -> Iterator[Sample]:
    s = t.summary
    for outcome, n in (("ok", s.runs_ok), ("failed", s.runs_failed),
                       ("invalid", s.runs_invalid)):
        yield "", {"outcome": outcome}, n


FAMILIES = (
    Family("stacklab_requests_per_second", "gauge", None,
           "Completed requests per second, median over the trial's successful runs.",
           lambda t: _one(t.summary.rps.median)),
    Family("stacklab_latency_seconds", "summary", "seconds",
           "Latency from the intended send time (corrected for coordinated omission), "
           "quantiles of the successful runs' merged histograms; _count: their samples.",
           _latency),
    Family("stacklab_transfer_bytes_per_second", "gauge", None,
           "Bytes read from the sockets (HTTP heads included) per second, median.",
           lambda t: _one(t.summary.mbps.median, 1e6)),
    Family("stacklab_errors", "counter", None,
           "Failed requests by the engine's error class, summed over the successful runs.",
           _errors),
    Family("stacklab_server_cpu_per_request_seconds", "gauge", "seconds",
           "A server component's CPU time per completed request, median.",
           _per_component("cpu_us_per_request", 1e-6)),
    Family("stacklab_memory_rss_peak_bytes", "gauge", "bytes",
           "A server component's peak resident memory under load, median.",
           _per_component("rss_mib_peak", MIB)),
    Family("stacklab_memory_rss_idle_bytes", "gauge", "bytes",
           "A server component's resident memory at rest, before the load, median.",
           _idle_rss),
    Family("stacklab_runs", "gauge", None,
           "The trial's stored runs by outcome (failed: a server or the engine broke; "
           "invalid: a verification failed).", _runs),
)


def label_name(knob: str) -> str:
    """A knob's label: `knob_` and its name with every character outside
    [a-zA-Z0-9_] made `_` (the prefix keeps it from starting with a digit or `__`)."""
    return "knob_" + re.sub(r"[^a-zA-Z0-9_]", "_", knob)


def knob_labels(knobs: list[str]) -> dict[str, str]:
    """knob → label name, unique: two knobs that sanitise alike get `_2`, `_3`, …"""
    out, taken = {}, set()
    for knob in knobs:
        name, n = label_name(knob), 1
        while (candidate := name if n == 1 else f"{name}_{n}") in taken:
            n += 1
        out[knob] = candidate
        taken.add(candidate)
    return out


def escape_label_value(value: str) -> str:
    return value.replace("\\", r"\\").replace('"', r'\"').replace("\n", r"\n")


def escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def number(value: float) -> str:
    """A sample value: an integer as such, a float in Python's shortest round-trip form,
    infinities and NaN as OpenMetrics spells them."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())


def export_openmetrics(view: ExperimentView) -> str:
    classes = error_classes(view)
    names = knob_labels(knob_names(view))
    trials = []
    for s in view.summaries:
        labels = {"experiment": view.name, "experiment_id": str(view.id),
                  "trial_id": s.trial_id, "stack": s.stack, "workload": s.workload,
                  "concurrency": str(s.concurrency),
                  **{names[k]: knob_text(v) for k, v in sorted(s.knobs.items())}}
        runs = [r for r in view.runs if r.trial_id == s.trial_id]
        trials.append((labels, Trial(s, runs, classes)))
    lines = []
    for f in FAMILIES:
        lines += [f"# TYPE {f.name} {f.type}", f"# HELP {f.name} {escape_help(f.help)}"]
        if f.unit:
            lines.append(f"# UNIT {f.name} {f.unit}")
        for labels, trial in trials:
            for suffix, extra, value in f.samples(trial):
                lines.append(f"{f.name}{suffix}{{{_labels({**labels, **extra})}}} "
                             f"{number(value)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
