"""Reports: text tables, the self-contained HTML report, CSV/JSON exports."""

from ..analysis.analyze import TrialSummary


def common_knobs(summaries: list[TrialSummary]) -> dict:
    """Knob values every trial shares: said once, not in every series name."""
    if not summaries:
        return {}
    common = dict(summaries[0].knobs)
    for s in summaries[1:]:
        common = {k: v for k, v in common.items() if s.knobs.get(k, object()) == v}
    return common


def series_name(s: TrialSummary, common: dict | None = None) -> str:
    """A line in a chart: what defines the trial except its concurrency (and `common`)."""
    common = common or {}
    knobs = [f"{k}={v}" for k, v in sorted(s.knobs.items())
             if k not in common or common[k] != v]
    return " ".join([s.stack, s.workload, *knobs])
