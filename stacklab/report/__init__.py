"""Reports: text tables, the self-contained HTML report, CSV/JSON exports."""

from ..analyze import TrialSummary


def series_name(s: TrialSummary) -> str:
    """A line in a chart: everything that defines the trial except its concurrency."""
    knobs = [f"{k}={v}" for k, v in sorted(s.knobs.items())]
    return " ".join([s.stack, s.workload, *knobs])
