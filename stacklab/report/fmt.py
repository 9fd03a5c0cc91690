"""How each kind of figure is written, once, for the text tables, the headline and the
HTML report alike (a missing figure is always a dash); and how a table of them fits the
terminal it is printed on (Fitted)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from ..analysis.analyze import Estimate, TrialSummary
from ..analysis.flags import BOUNDING, INVALIDATING
from ..analysis.stats import multiple, ratio_text as _ratio, signed_change

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


def times(ratio: float | None, decimals: int = 2, unit: str = "×") -> str:
    """A ratio to a reference, in the one form every command writes a multiple in:
    "1.52×", "34.9×", "1,482×" (never "1.48e+03×" nor "5876761.10×")."""
    return DASH if ratio is None else f"{_ratio(ratio, decimals)}{unit}"


def p_value(p: float | None) -> str:
    return DASH if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def p_cell(p: float | None) -> str:
    """`p_value` in a table's cell, one word: "<0.001"."""
    return p_value(p).replace("< ", "<")


def ratio_ci(ci: tuple[float, float] | None, decimals: int = 2, unit: str = "×") -> str:
    """A ratio's 95% CI, low–high."""
    return DASH if not ci else f"{_ratio(ci[0], decimals)}–{_ratio(ci[1], decimals)}{unit}"


def vs(c) -> str:
    """A comparison as its ratio and verdict: "1.52× (B wins)"."""
    if c is None or c.ratio is None:
        return DASH
    if c.ratio == 1.0 and c.p == 1.0:
        return "same variant"
    if c.verdict.endswith("×"):
        return times(c.ratio)       # the verdict would only say the multiple again
    return f"{times(c.ratio)} ({c.verdict})"


def change(gain: float) -> str:
    """A relative change (0.5 → "+50.0%"; from 3× up a multiple: 348.8 → "349×",
    1481 → "1,482×"): analysis.stats.signed_change's rule, in `multiple`'s form."""
    return signed_change(gain + 1)


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


# What a trial's figures need said, once -----------------------------------------------

def trial_notes(s: TrialSummary) -> list[str]:
    """What a reader must know about a trial before trusting a figure of it, said once:
    each flag with the numbers that raised it and what it does to a ratio, percentiles
    of only the clients served, a busy host, runs measured again."""
    out = []
    for name, detail in s.flag_details:
        meaning = (f" (it {BOUNDING[name]}: a ratio against it is a bound)"
                   if name in BOUNDING else
                   f" (it {INVALIDATING[name]}: a ratio against it is no measurement)"
                   if name in INVALIDATING else "")
        out.append(f"{name} — {detail}{meaning}")
    if s.latency_distorted:
        out.append("its p50/p99 describe the clients that were served, not the trial's "
                   "latency")
    if s.disturbance > 1.0:
        out.append("ran on a busy host: " + (
            "its slow-down was not measured" if s.disturbance == float("inf") else
            f"its runs on the busy host gave {s.busy_ratio:.0%} of its others' req/s "
            "(medians)" if s.busy_ratio is not None else
            "within its experiment it is compared round by round, so what slowed both "
            "runs of a round cancels"))
    if s.runs_set_aside:
        out.append(f"{s.runs_set_aside} disturbed run{'' if s.runs_set_aside == 1 else 's'}"
                   " measured again and set aside")
    return out


class Footnotes:
    """One numbered note per trial that has something to say (trial_notes), so that a
    flag's words are printed once, not once per metric; "⚑N" marks where they apply."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self._numbers: dict[tuple, int] = {}

    def mark(self, s: TrialSummary, who: str = "") -> str:
        """" ⚑N" for the trial (`who`: "A's", "B = …"), or "" when it has no note."""
        key = (who, s.trial_id)
        if key not in self._numbers:
            notes = trial_notes(s)
            if not notes:
                return ""
            self.notes.append(f"⚑{len(self.notes) + 1} {who + ' ' if who else ''}"
                              f"{s.label}: {'; '.join(notes)}")
            self._numbers[key] = len(self.notes)
        return f" ⚑{self._numbers[key]}"


# Tables that fit a terminal ---------------------------------------------------------
#
# Rich shrinks a table too wide for the terminal by cutting cells with "…" (a number
# loses its digits) or by folding words in the middle. A Fitted table works out its
# column widths itself: figures are never wrapped, words wrap between words, and when
# even that is too wide the figure columns go to a second table that repeats the key
# columns (the trial's name), so every figure and every word is printed whole.

GAP = 2         # between two columns: one space of padding and the (blank) rule


@dataclass(frozen=True)
class Col:
    """A column: `header` ("\\n" where it may break), `words` (wraps between words,
    left-aligned; else a figure: one line, right-aligned), `key` (repeated in each part
    of a split table: what names the row), `spare` (for information: the last to be
    given a place, so that it is the one moved to another part), `breaks` (a figure
    that may break at its space when the terminal is narrow: "< 0.001", "≥ 0.333")."""

    header: str
    words: bool = False
    key: bool = False
    spare: bool = False
    breaks: bool = False

    @property
    def wraps(self) -> bool:
        return self.words or self.breaks


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _narrowest(col: Col, cells: list[str]) -> int:
    """The narrowest a column can be without cutting or folding anything: its longest
    word (words), else its longest line."""
    pieces = [p for t in (col.header, *cells) for line in _lines(t)
              for p in (line.split() if col.wraps else [line])]
    return max((cell_len(p) for p in pieces), default=1)


def _widest(col: Col, cells: list[str]) -> int:
    return max((cell_len(line) for t in (col.header, *cells) for line in _lines(t)),
               default=1)


def widths(cols: list[Col], rows: list[list[str]], width: int) -> list[int] | None:
    """Each column's width so that the table takes at most `width` columns: as wide as
    its content, word columns narrowed (the widest first) down to their longest word;
    None when even that does not fit."""
    cells = [[r[i] for r in rows] for i in range(len(cols))]
    low = [_narrowest(c, x) for c, x in zip(cols, cells)]
    out = [max(lo, _widest(c, x)) for c, x, lo in zip(cols, cells, low)]
    excess = sum(out) + GAP * (len(cols) - 1) - width
    while excess > 0:       # words wrap first; a figure breaks at its space only then
        slack = [(cols[i].words, w - lo, i) for i, (w, lo) in enumerate(zip(out, low))
                 if cols[i].wraps and w > lo]
        _, room, widest = max(slack, default=(False, 0, -1))
        if room <= 0:
            return None
        out[widest] -= 1
        excess -= 1
    return out


def parts(cols: list[Col], rows: list[list[str]], width: int) -> list[list[int]]:
    """The columns of each table the rows are printed in: all in one when they fit, else
    the key columns in each and every other column, in order, in the first table it fits
    in (a wide column of information, like MW p, leaves the verdict beside the ratio)."""
    keys = [i for i, c in enumerate(cols) if c.key]
    out: list[list[int]] = []

    def fits(tried: list[int]) -> bool:
        return widths([cols[j] for j in tried], [[r[j] for j in tried] for r in rows],
                      width) is not None

    for i in sorted((i for i, c in enumerate(cols) if not c.key),
                    key=lambda i: cols[i].spare):
        home = next((n for n, part in enumerate(out) if fits(sorted(part + [i]))), None)
        if home is None:
            out.append(keys + [i])      # alone if need be: folded then, never cut
        else:
            out[home] = sorted(out[home] + [i])
    return out or [keys]


@dataclass
class Fitted:
    """A table laid out for the width it is printed at (see above). `ends`: the rows
    after which a rule is drawn (the last metric of a trial)."""

    title: str | None
    cols: list[Col]
    rows: list[list[str]] = field(default_factory=list)
    caption: str | None = None
    ends: frozenset[int] = frozenset()

    def tables(self, width: int) -> list[Table]:
        split = parts(self.cols, self.rows, width)
        return [self._table(cols, width) for cols in split]

    def _table(self, keep: list[int], width: int) -> Table:
        cols = [self.cols[i] for i in keep]
        rows = [[r[i] for i in keep] for r in self.rows]
        fit = widths(cols, rows, width) or [_narrowest(c, [r[i] for r in rows])
                                            for i, c in enumerate(cols)]
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0),
                  pad_edge=False, collapse_padding=True)
        for c, w in zip(cols, fit):
            t.add_column(c.header, width=w, justify="left" if c.words else "right",
                         no_wrap=not c.wraps, overflow="fold")
        for i, r in enumerate(rows):
            t.add_row(*r, end_section=i in self.ends)
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """The title, the table (or its parts, each said as such), then the caption:
        title and caption wrap at the terminal's width, not the table's."""
        tables = self.tables(options.max_width)
        if self.title:
            yield Text(self.title, style="bold")
        for n, table in enumerate(tables):
            if len(tables) > 1:
                yield Text(f"(part {n + 1} of {len(tables)})", style="italic")
            yield table
        if self.caption:
            yield Text(self.caption, style="dim")
