"""How each kind of figure is written, once, for the text tables, the headline and the
HTML report alike. A missing figure is always a dash."""

from __future__ import annotations

from ..analyze import Estimate

DASH = "—"


def number(value: float | None, decimals: int = 0) -> str:
    """A figure with its thousands grouped: requests/s, bytes and counts whole,
    MB/s, CPU µs per request and MiB with one decimal."""
    return DASH if value is None else f"{value:,.{decimals}f}"


def ms(value_us: float | None) -> str:
    """A latency stored in µs, written in ms."""
    return DASH if value_us is None else f"{value_us / 1000:.2f}"


def milliseconds(value_ms: float | None, decimals: int = 3) -> str:
    """A time stored in ms (a breakdown's shares of one request), written in ms."""
    return DASH if value_ms is None else f"{value_ms:.{decimals}f}"


def percent(value: float | None) -> str:
    """A share of a whole, in whole percent."""
    return DASH if value is None else f"{value:.0f}%"


def count(value: float) -> str:
    """A count per something, as short as it is exact: 2, 7.5 (statements per loop)."""
    return f"{value:g}"


def times(ratio: float | None) -> str:
    """A ratio to a reference: "1.52×"."""
    return DASH if ratio is None else f"{ratio:.2f}×"


def p_value(p: float | None) -> str:
    return DASH if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def ratio_ci(ci: tuple[float, float] | None, decimals: int = 2, unit: str = "×") -> str:
    """A ratio's 95% CI, low–high."""
    return DASH if not ci else f"{ci[0]:.{decimals}f}–{ci[1]:.{decimals}f}{unit}"


def vs(c) -> str:
    """A comparison as its ratio and verdict: "1.52× (B wins)"."""
    if c is None or c.ratio is None:
        return DASH
    if c.ratio == 1.0 and c.p == 1.0:
        return "same variant"
    return f"{times(c.ratio)} ({c.verdict})"


def change(gain: float) -> str:
    """A relative change (0.5 → "+50.0%")."""
    return f"{gain * 100:+.1f}%"


def _interval(e: Estimate, write) -> str:
    if not e.ci:
        return DASH
    return ("range " if e.is_range else "") + f"{write(e.ci[0])}–{write(e.ci[1])}"


def ci(e: Estimate) -> str:
    """A req/s estimate's 95% CI, or with fewer than 6 values their range (min–max),
    called so."""
    return _interval(e, number)


def ci_ms(e: Estimate) -> str:
    """`ci` of a latency stored in µs, in ms."""
    return _interval(e, ms)


def ci_text(e: Estimate) -> str:
    """Relative to the median: a 95% CI as ± its half-width ("±3%"); with fewer than 6
    values their range, min to max ("-4%…+2%"), which is no 95% interval (`ci_header`
    names the column for what its cells are)."""
    if e.is_range and e.median:
        lo, hi = (min(e.values) / e.median - 1) * 100, (max(e.values) / e.median - 1) * 100
        return f"{lo:+.0f}%…{hi:+.0f}%"
    hw = e.half_width
    return DASH if hw is None else f"±{hw * 100:.0f}%"


def ci_header(estimates) -> str:
    """The column's name: "95% CI" only when no cell is a range, "range" when all are."""
    ranges = [e.is_range for e in estimates if e.values]
    return "range" if ranges and all(ranges) else (
        "95% CI / range" if any(ranges) else "95% CI")
