"""A capacity experiment in words (`capacity`, `run` and `show` print them): each
trial's capacity over its searches with their range or interval, the latency at 50, 80,
90 and 100% of it, the server's CPU per request at 50%, and how each search ended —
from the searches as searches.py reads them."""

from __future__ import annotations

from statistics import median

from ..analysis.analyze import ExperimentView
from ..analysis.capacity import CONNECTIONS_BOUND, NOT_THE_SERVER
from .fmt import DASH, ci, number
from .searches import SHARES, CapacityTrial, Search, Step, capacity_trials


def capacity_lines(view: ExperimentView) -> list[str]:
    """Nothing for an experiment without capacity searches."""
    trials = capacity_trials(view)
    if not trials:
        return []
    first = trials[0].slo
    several = max(len(t.capacity.values) for t in trials) >= 6
    out = [f"capacity: the highest open-loop rate whose {first.slo} held, with errors at "
           f"most {first.max_error_rate:.2%}, at {first.connections} connections; each search "
           "on a fresh stack, its result confirmed for the experiment's duration; over the "
           "searches: median and " + ("95% CI" if several else
                                      "range (fewer than 6 searches: no 95% interval)")]
    for t in trials:
        out += _trial_lines(t)
    return out


def _trial_lines(t: CapacityTrial) -> list[str]:
    c = t.capacity
    spread = (ci(c) if len(c.values) > 1 else "one search" if len(t.searches) == 1 else
              f"1 of {len(t.searches)} searches confirmed one")
    lines = [f"  {t.name}: {number(c.median)} req/s ({spread})" if c.median else
             f"  {t.name}: no capacity found ({_none_why(t.searches)})"]
    found = [s for s in t.searches if s.capacity is not None]
    if brackets := [s for s in found if s.failed_above is not None]:
        lines.append("    each search's bracket (held twice at full length – the lowest rate "
                     "above it that failed): " + ", ".join(
                         f"{number(s.capacity)}–{number(s.failed_above)}"
                         for s in brackets[:6]) + (", …" if len(brackets) > 6 else ""))
    if found:
        lines.append(f"    p50 / p{found[0].percentile:g} at " + ", ".join(
            f"{share:.0%}: {_latency([s.at(share) for s in found])}" for share in SHARES))
        if cpu := _cpu([s.at(SHARES[0]) for s in found]):
            lines.append(f"    server CPU per request at {SHARES[0]:.0%} of it: {cpu}")
    steps = [len(s.offered) for s in t.searches]
    again = sum(1 for s in t.searches for st in s.steps if "measured again" in st.reason)
    ended = ", ".join(sorted({s.stopped + ("" if s.confirmed else ", not confirmed")
                              for s in t.searches}))
    lines.append(f"    {len(t.searches)} search(es), {min(steps)}–{max(steps)} steps each, "
                 f"ended: {ended}" + (f"; {again} step(s) measured again (host or engine)"
                                      if again else ""))
    if any(CONNECTIONS_BOUND in st.flags for s in t.searches for st in s.steps):
        lines.append(f"    {CONNECTIONS_BOUND}: some steps lost rate while the server "
                     "answered within the limit: the connections were all waiting, so the "
                     "capacity found may be theirs; measure again with more --connections")
    if bounded := _bounded(found):
        lines.append(f"    a lower bound: steps that failed just above it were flagged "
                     f"{', '.join(bounded)} (a disturbance only adds latency; a pass under "
                     "it stands)")
    if any(s.stopped == "no-fail" for s in found):
        lines.append("    no-fail: a search passed at its ceiling (1.25 × the closed-loop "
                     "probe): the capacity is at least that; more --connections raise it")
    return lines


def _bounded(found: list[Search]) -> list[str]:
    """What disturbed the steps that failed just above a capacity (within 10% of it; a
    step's last measurement, not one measured again): only those can have held it low."""
    return sorted({f for s in found for st in s.steps
                   if st.decision == "fail" and "measured again" not in st.reason
                   and st.rate is not None and s.capacity < st.rate <= 1.1 * s.capacity
                   for f in st.flags if f in NOT_THE_SERVER})


def _latency(steps: list[Step | None]) -> str:
    """Median p50 / percentile in ms over the searches' steps at one share."""
    seen = [s for s in steps if s is not None and s.p50_us is not None
            and s.value_us is not None]
    if not seen:
        return DASH
    return (f"{median(s.p50_us for s in seen) / 1000:.2f} / "
            f"{median(s.value_us for s in seen) / 1000:.2f} ms")


def _cpu(steps: list[Step | None]) -> str:
    """Each component's CPU µs per request: median, and range over the searches."""
    per: dict[str, list[float]] = {}
    for step in steps:
        for c, v in (step.cpu_us_per_request if step else {}).items():
            per.setdefault(c, []).append(v)
    return ", ".join(f"{c} {median(v):.1f} µs" + (f" ({min(v):.1f}–{max(v):.1f})"
                                                  if len(v) > 1 else "")
                     for c, v in sorted(per.items()))


def _none_why(searches: tuple[Search, ...]) -> str:
    stopped = sorted({s.stopped for s in searches})
    if "probe-failed" in stopped:
        return "the closed-loop probe completed no request"
    lowest = min((st for s in searches for st in s.offered), key=lambda st: st.rate,
                 default=None)
    if lowest is None:
        return ", ".join(stopped)
    return (f"even {number(lowest.rate)} req/s failed: {lowest.reason}"
            if lowest.decision != "pass" else
            f"no rate held at full length ({', '.join(stopped)})")
