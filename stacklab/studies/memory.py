"""Memory as S2 and S4 measured it: per component and per worker process, idle (after
ready, before load), under load and after it, RSS and PSS, and what N clients cost —
the medians over a trial's successful runs, from what the monitor stored with each."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..analysis.analyze import ExperimentView
from ..store import Outcome

# (column, the monitor's key in a run's resources.components[component])
FIELDS = (("processes", "processes_max"), ("idle PSS MiB", "idle_pss_mib"),
          ("idle PSS/worker MiB", "idle_pss_mib_per_worker"),
          ("load PSS MiB", "pss_mib_peak"), ("load PSS/worker MiB", "pss_mib_per_worker"),
          ("idle RSS MiB", "rss_mib_idle_before"), ("load RSS MiB", "rss_mib_peak"),
          ("after RSS MiB", "rss_mib_after"))


@dataclass(frozen=True)
class MemoryRow:
    experiment: str
    trial: str                  # its label
    concurrency: int
    component: str
    figures: dict[str, float | None]      # column -> median over the ok runs

    @property
    def per_client_mib(self) -> float | None:
        """What each connected client added: (PSS under load − PSS idle) / clients."""
        idle, load = self.figures.get("idle PSS MiB"), self.figures.get("load PSS MiB")
        if idle is None or load is None or not self.concurrency:
            return None
        return (load - idle) / self.concurrency


def memory_rows(view: ExperimentView) -> list[MemoryRow]:
    """One row per trial and server component (the load engine is not a server)."""
    out = []
    for s in view.summaries:
        runs = [r for r in view.runs if r.trial_id == s.trial_id and r.outcome is Outcome.OK]
        components = sorted({c for r in runs for c in r.resources.components})
        for c in components:
            figures = {}
            for column, key in FIELDS:
                values = [v for r in runs
                          if isinstance(v := r.resources.figure(c, key), (int, float))]
                figures[column] = statistics.median(values) if values else None
            out.append(MemoryRow(view.name, s.label, s.concurrency, c, figures))
    return out
