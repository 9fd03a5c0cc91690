"""An access log as a load: the requests of a Common or Combined Log Format file (nginx's
and Apache's default access logs), their URL mix and their arrival times.

Pure functions of the log's text, so every rule is tested with plain tables: which lines
are replayed (GET and HEAD answered 2xx or 3xx), which are counted apart (other methods,
other statuses) and which cannot be read, each by a reason with its first line number.
Nothing a log holds is dropped unsaid: `LogReport` is stored with every run of a replay.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from ..errors import SpecError
from ..host.regular import open_regular

REPLAYED_METHODS = ("GET", "HEAD")
# A log larger than this is refused: its schedule and URL list live in memory twice (here
# and in the engine) and it is parsed again before every run.
MAX_LOG_LINES = 2_000_000
# A timed replay shorter than this is refused, as experiment.duration is.
MIN_REPLAY_S = 0.1
MAX_LINE_CHARS = 64 << 10   # a request line and its fields; /dev/zero has no end of line
# host ident user [time] "request" status bytes, then Combined's "referer" "user-agent";
# a quoted field may hold \" (Apache and nginx escape quotes that way).
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_LINE = re.compile(r'(\S+) (\S+) (\S+) \[([^\]]*)\] ' + _QUOTED + r' (\d{3}|-) (\d+|-)'
                   r'(?: ' + _QUOTED + ' ' + _QUOTED + r')?\s*')
_TIME_FORMAT = "%d/%b/%Y:%H:%M:%S %z"     # 10/Oct/2000:13:55:36 -0700
_METHOD = re.compile(r"[A-Z][A-Z_-]*")
# What a replayed path may hold: the engine's URL list splits on whitespace and its
# request line must stay one line, so visible ASCII only (logs escape the rest as \xNN).
_PATH = re.compile(r"/[!-~]*")


@dataclass(frozen=True)
class Request:
    """One replayable line: a GET or HEAD the server answered 2xx or 3xx."""

    line: int            # 1-based, in the file
    method: str          # GET or HEAD
    path: str            # as logged: the query string kept
    time_s: float        # seconds since the epoch (the log's 1 s resolution)


@dataclass
class LogReport:
    """What a log held besides its replayable requests, each count with the first line
    it was seen on: the lines that could not be read, by reason; the methods and the
    statuses that are not replayed."""

    lines: int = 0
    replayable: int = 0
    bad: Counter = field(default_factory=Counter)             # reason -> lines
    first_bad: dict[str, int] = field(default_factory=dict)   # reason -> first line
    other_methods: Counter = field(default_factory=Counter)   # "POST" -> lines
    other_statuses: Counter = field(default_factory=Counter)  # "4xx" -> lines

    def count_bad(self, reason: str, line: int) -> None:
        self.bad[reason] += 1
        self.first_bad.setdefault(reason, line)

    def said(self) -> str:
        """One line: how many lines were replayable and what the rest were."""
        parts = [f"{self.replayable} of {self.lines} lines replayable (GET/HEAD, 2xx/3xx)"]
        if self.bad:
            parts.append("unreadable: " + ", ".join(
                f"{n} {why} (first line {self.first_bad[why]})"
                for why, n in self.bad.most_common()))
        if self.other_methods:
            parts.append("other methods: " + ", ".join(
                f"{n} {m}" for m, n in self.other_methods.most_common()))
        if self.other_statuses:
            parts.append("other statuses: " + ", ".join(
                f"{n} {s}" for s, n in sorted(self.other_statuses.items())))
        return "; ".join(parts)

    def to_json(self) -> dict:
        return {"lines": self.lines, "replayable": self.replayable,
                "unreadable": {why: {"lines": n, "first_line": self.first_bad[why]}
                               for why, n in self.bad.most_common()},
                "other_methods": dict(self.other_methods.most_common()),
                "other_statuses": dict(sorted(self.other_statuses.items()))}


@dataclass(frozen=True)
class AccessLog:
    """A parsed log: its replayable requests in file order, and what else it held."""

    requests: tuple[Request, ...]
    report: LogReport
    sha256: str = ""     # the file's, as read (read_log): stored with each run's replay

    def mix(self) -> list[tuple[tuple[str, str], int]]:
        """Each (method, path) with how many times it was requested, most frequent first
        (ties in first-seen order): the URL mix as the engine's weights."""
        return Counter((r.method, r.path) for r in self.requests).most_common()


def parse_line(text: str) -> Request | str:
    """One line as a Request, or why it is not one: a reason it cannot be read, or
    "method X" / "status Nxx" for a line read but not replayed."""
    if not text.strip():
        return "empty line"
    m = _LINE.fullmatch(text)
    if not m:
        return "not Common or Combined Log Format"
    try:
        when = datetime.strptime(m[4], _TIME_FORMAT).timestamp()
    except ValueError:
        return "bad timestamp"
    words = m[5].split(" ")
    if len(words) not in (2, 3) or not _METHOD.fullmatch(words[0]):
        return "bad request line"
    method, target = words[0], words[1]
    if method not in REPLAYED_METHODS:
        return f"method {method}"
    if not _PATH.fullmatch(target):
        return ("absolute URL (a proxy's request)" if "://" in target else
                "path not /… in visible ASCII")
    status = m[6]
    if status == "-" or not "200" <= status < "400":
        return f"status {status[0]}xx" if status != "-" else "no status"
    return Request(0, method, target, when)


def parse_log(lines: list[str]) -> AccessLog:
    """Every line of a log read: replayable requests kept in order, the rest counted."""
    report, requests = LogReport(lines=len(lines)), []
    for number, text in enumerate(lines, 1):
        got = parse_line(text)
        if isinstance(got, Request):
            requests.append(Request(number, got.method, got.path, got.time_s))
        elif got.startswith("method "):
            report.other_methods[got.removeprefix("method ")] += 1
        elif got.startswith("status "):
            report.other_statuses[got.removeprefix("status ")] += 1
        else:
            report.count_bad(got, number)
    report.replayable = len(requests)
    return AccessLog(tuple(requests), report)


def read_log(path: Path) -> AccessLog:
    """The log at `path` parsed (latin-1: any byte is a character, so no line is lost
    to decoding; a non-ASCII path is then refused by reason), with its sha256. OSError
    when unreadable, ValueError when past MAX_LOG_LINES."""
    with open_regular(path) as raw:
        digest = hashlib.sha256()
        text = io.TextIOWrapper(io.BufferedReader(_Hashed(raw, digest)), encoding="latin-1",
                                newline=None)
        lines = []
        while line := text.readline(MAX_LINE_CHARS + 1):
            if len(line) > MAX_LINE_CHARS:
                raise ValueError(f"line {len(lines) + 1} is longer than "
                                 f"{MAX_LINE_CHARS >> 10} KiB: not an access log")
            lines.append(line.rstrip("\n"))
            if len(lines) > MAX_LOG_LINES:
                raise ValueError(f"more than {MAX_LOG_LINES:,} lines")
    return replace(parse_log(lines), sha256=digest.hexdigest())


def log_sha256(path: Path) -> str:
    """The file's sha256, without parsing it (what a run's versions record of its log)."""
    with open_regular(path) as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class _Hashed(io.RawIOBase):
    """A binary file whose bytes are hashed as they are read: the log is hashed in the
    same pass that reads it, so the hash is of the lines replayed."""

    def __init__(self, source: io.BufferedReader, digest: hashlib._Hash):
        self.source, self.digest = source, digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.source.readinto(buffer)
        self.digest.update(memoryview(buffer)[:n])
        return n


def arrival_offsets(times_s: list[float], rate: float) -> list[float]:
    """Each request's send offset (s from the start) so that the log is played at `rate`
    requests per second on average, its shape kept. A log has 1 s resolution: the k-th
    of n requests logged in one second is placed at k/n into it (evenly, not all at
    once), the log covers [first second, last second + 1), and that window is scaled to
    len(times) / rate seconds. Times must be in file order; a clock going back (a log
    merged from servers) keeps each request's place in the file, never sent earlier
    than the one before it."""
    if not times_s:
        return []
    seconds = [math.floor(t) for t in times_s]
    spread, i = [], 0
    while i < len(seconds):
        j = i
        while j < len(seconds) and seconds[j] == seconds[i]:
            j += 1
        spread += [seconds[i] + k / (j - i) for k in range(j - i)]
        i = j
    first = min(seconds)
    window = max(seconds) - first + 1
    scale = len(times_s) / rate / window
    offsets, last = [], 0.0
    for t in spread:
        last = max(last, (t - first) * scale)
        offsets.append(last)
    return offsets


# ---- the experiment file's load.replay: resolved and checked before any server starts


def resolve_replay(file: str, fixed: dict, axes: dict) -> None:
    """load.replay made absolute (relative to the experiment file's directory, where it
    is written), its log read and checked; load.replay_times checked against load.rate.
    Each problem is one SpecError naming the key and the value. In place: the replay is
    a fixed knob (a log per trial would be an axis: refused, one log per experiment)."""
    if "load.replay" in axes:
        raise SpecError(file, "matrix.load.replay", list(axes["load.replay"]),
                        "one log per experiment: set load.replay in [load]")
    given = fixed.get("load.replay") or ""
    if fixed.get("load.replay_times") and not given:
        raise SpecError(file, "load.replay_times", True, "needs load.replay (a log file)")
    if not given:
        return
    path = Path(file).resolve().parent / given
    try:
        log = read_log(path)
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise SpecError(file, "load.replay", given, f"{path}: {why}") from None
    if not log.requests:
        raise SpecError(file, "load.replay", given, f"nothing to replay: "
                        f"{log.report.said()}")
    if fixed.get("load.replay_times"):
        rates = axes.get("load.rate", (fixed.get("load.rate", 0),))
        if not all(rates):
            raise SpecError(file, "load.replay_times", True, "needs load.rate (the log's "
                            "average rate is scaled to it: an open loop)")
        if (span := len(log.requests) / max(rates)) < MIN_REPLAY_S:
            raise SpecError(file, "load.rate", max(rates), f"the log's "
                            f"{len(log.requests)} requests at {max(rates)}/s are played in "
                            f"{span:.3g} s: at least {MIN_REPLAY_S} s can be measured "
                            "(the monitor samples every 100 ms); a lower rate or a longer log")
    fixed["load.replay"] = str(path)
