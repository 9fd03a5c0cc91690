"""A capacity experiment in words (`capacity`, `run` and `show` print them): each
trial's capacity over its searches with their range or interval, the latency at 50, 80,
90 and 100% of it, and how each search ended — from the runs' "capacity" parts
(run/capacity.py)."""

from __future__ import annotations

from statistics import median

from ..analysis.analyze import ExperimentView, TrialSummary
from .fmt import DASH, ci, number

# What a step flagged that is not the server's doing (run/capacity.NOT_THE_SERVER)
NOT_THE_SERVER = ("host-busy", "io-pressure", "generator-bound")
SHARES = ((0.5, "profile"), (0.8, "profile"), (0.9, "profile"), (1.0, "confirm"))


def searches(view: ExperimentView, s: TrialSummary) -> list[dict]:
    """The capacity parts of the trial's runs, in the order they ran."""
    return [part for r in view.runs if r.trial_id == s.trial_id
            and (part := r.resources.part("capacity"))]


def capacity_lines(view: ExperimentView) -> list[str]:
    """Nothing for an experiment without capacity searches."""
    found = [(s, parts) for s in view.summaries if (parts := searches(view, s))]
    if not found:
        return []
    first = found[0][1][0]
    out = [f"capacity: the highest open-loop rate whose {first['slo']} held, with errors "
           f"at most {first['max_error_rate']:.2%}, at {first['connections']} connections; "
           "each search on a fresh stack, its result confirmed for the experiment's "
           "duration; over the searches: median and " + _spread_word(found)]
    for s, parts in found:
        out += _trial_lines(s, parts)
    return out


def _spread_word(found: list[tuple[TrialSummary, list[dict]]]) -> str:
    n = max(len(s.capacity.values) for s, _ in found)
    return "95% CI" if n >= 6 else "range (fewer than 6 searches: no 95% interval)"


def _trial_lines(s: TrialSummary, parts: list[dict]) -> list[str]:
    c = s.capacity
    spread = ci(c) if len(c.values) > 1 else "one search"
    head = (f"  {s.label}: {number(c.median)} req/s ({spread})" if c.median else
            f"  {s.label}: no capacity found ({_none_why(parts)})")
    found = [p for p in parts if p.get("capacity")]
    lines = [head]
    if found:
        lines.append("    p50 / " + f"p{found[0]['percentile']:g} at " + ", ".join(
            f"{share:.0%}: {_at(found, share, phase)}" for share, phase in SHARES))
    steps = [sum(1 for st in p["steps"] if st["phase"] != "probe") for p in parts]
    again = sum(1 for p in parts for st in p["steps"] if "measured again" in st["reason"])
    ended = ", ".join(sorted({p["stopped"] + ("" if p["confirmed"] else ", not confirmed")
                              for p in parts}))
    lines.append(f"    {len(parts)} search(es), {min(steps)}–{max(steps)} steps each, "
                 f"ended: {ended}" + (f"; {again} step(s) measured again (host or engine)"
                                      if again else ""))
    if bounded := _bounded(parts):
        lines.append(f"    a lower bound: steps that failed were flagged {bounded} "
                     "(a disturbance only adds latency; a pass under it stands)")
    return lines


def _at(found: list[dict], share: float, phase: str) -> str:
    """The median p50 and SLO percentile of the searches' steps at that share."""
    p50, tail = [], []
    for part in found:
        for st in part["steps"]:
            if st["phase"] == phase and st["decision"] is not None and (
                    phase == "confirm" and st["rate"] == round(part["capacity"])
                    or phase == "profile"
                    and abs(st["rate"] - share * part["capacity"]) <= 1):
                p50.append(st["p50_us"])
                tail.append(st.get("slo_us") or st["p99_us"])
    if not p50:
        return DASH
    return f"{median(p50) / 1000:.2f} / {median(tail) / 1000:.2f} ms"


def _none_why(parts: list[dict]) -> str:
    stopped = sorted({p["stopped"] for p in parts})
    if "probe-failed" in stopped:
        return "the closed-loop probe completed no request"
    lowest = min((st for p in parts for st in p["steps"] if st["rate"]),
                 key=lambda st: st["rate"], default=None)
    if lowest is None:
        return ", ".join(stopped)
    return (f"even {number(lowest['rate'])} req/s failed: {lowest['reason']}"
            if lowest["decision"] != "pass" else
            f"no rate was confirmed at full length ({', '.join(stopped)})")


def _bounded(parts: list[dict]) -> str:
    seen = sorted({f for p in parts for st in p["steps"] if st["decision"] == "fail"
                   for f in st["flags"] if f in NOT_THE_SERVER})
    return ", ".join(seen)

