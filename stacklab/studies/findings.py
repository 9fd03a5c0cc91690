"""A study's findings as data (stacklab/studies/findings/s1.toml … s5.toml).

Each finding quotes the study's own figures from SEEDS.md, the digest of the five source
texts, with the section (or slide) of the full text that says them, and states its claim
as something stacklab can check today — or why it cannot be built here, from a fixed list
of reasons. The figures are data, never typed into a report: `missing_figures` counts
SEEDS.md's result numbers against them, so a report (and a test) can say which numbers
no finding quotes.

The extraction rule, in one place:
- which bullets carry results: in a study section with a **Results** block (S1), the
  bullets of that block; elsewhere every bullet, except those in NOT_RESULTS (method,
  configuration, set-up). A bullet with "Result…:" in it (S1's overview method, S5's
  results) carries results from there on;
- which numbers of such a bullet are results: every number (1,571 → 1571; "−8%" → -8;
  "751–1067" → 751 and 1067), after the spans in CONDITIONS are cut out (code, concurrency
  levels, test numbers, request/user counts, object sizes, link rates, gzip levels,
  an HTTP status);
- a bullet's numbers must all be among the figures of the findings whose `seeds` the
  bullet starts with, each as many times as the bullet has it (signs are not compared).
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import NotFound, SpecError

STUDY_IDS = ("S1", "S2", "S3", "S4", "S5")
FINDINGS = Path(__file__).parent / "findings"
# The source texts and their digest lie beside the repository (README: ../shared/reference).
REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference"
# The digest, copied into the package so a clone or an install has it (the full texts
# stay in shared/reference: the studies' prose does not carry over).
DIGEST = Path(__file__).parent / "SEEDS.md"
# Why a result cannot be measured here: the kernel lacks a feature, the software is gone,
# no sources to rebuild with, the study's own machines or site, an operating system other
# than Linux, or a stack shape the grammar cannot build yet (say which in the detail).
REASONS = ("kernel-feature", "software-gone", "compiler-flags", "real-server", "other-os",
           "stack-shape")
DIRECTIONS = ("b>a", "b<a", "b=a")
KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# Bullets of S2–S5 that describe method, configuration or set-up, not a measured outcome:
# their numbers are not counted. Keyed by the bullet's first words; the value says why.
NOT_RESULTS: dict[str, dict[str, str]] = {
    "S2": {
        "Tool: ab": "the load tool and its command lines",
        "LVS cluster (ipvsadm": "how the cluster was built; the 100 is how many requests were plotted",
    },
    "S4": {
        "Scenario: 1 CPU": "the talk's hosting scenario (CPU, memory, customers)",
    },
    "S5": {
        "An automated test system": "the servers' configuration (MPM and nginx settings, limits)",
        "Objects: static": "the objects served and their sizes",
        "Configurations: raw": "the configurations tested (TLS key and cipher, gzip levels)",
        "Load: concurrency": "the load: concurrency levels, requests, iterations, test cases",
        "Per run: memory": "what was stored per run (sampling interval, document layout)",
    },
}

# Spans of a result bullet whose numbers describe the condition, not the outcome.
CONDITIONS: tuple[tuple[str, str], ...] = (
    (r"`[^`]*`", "code: a command line or a setting"),
    (r"\bc=\d+(?:/\d+)*", "a concurrency level (c=50, c=50/500)"),
    (r"\b(?:concurrency|at) \d+(?:/\d+)+", "a list of concurrency levels (at 1/50/150)"),
    (r"\btests? \d+\b", "one of S1's four test URLs (test 3)"),
    (r"\b\d[\d,]* (?:requests|req|users|connections|processes)\b(?!/)",
     "a count of requests, users, connections or processes: the load"),
    (r"~?\d+ [KM]B (?:static )?(?:page|file)s?\b|\bfiles ~?\d+ [KM]B",
     "the size of the object served (100 KB static file, files ~20 MB)"),
    (r"\b\d+ [MG]b\b(?!/)", "a link rate (100 Mb vs 1 Gb)"),
    (r"\blevels? \d+(?:(?:,| and| or) \d+)*", "a compression level (gzip level 1)"),
    (r"→ 304\)", "an HTTP status (→ 304 Not Modified)"),
)
_CONDITION = re.compile("|".join(f"(?:{p})" for p, _ in CONDITIONS))
_NUMBER = re.compile(r"(?<![\w.,])([+\-\u2212]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\w)")
_RESULT_CUE = re.compile(r"\bResults?\b[^:.]*:")
_SECTION = re.compile(r"^## (S\d)\b", re.M)


@dataclass(frozen=True)
class Software:
    """A piece of software the study measured ("then"), and where the study says it."""

    component: str                # stacklab's component name where one exists
    name: str
    version: str                  # as the study gives it; "" when it does not say
    section: str


@dataclass(frozen=True)
class Figure:
    value: float                  # as written in SEEDS.md (1,571 → 1571, +68% → 68)
    unit: str
    what: str                     # what the number is (side, concurrency, test)


@dataclass(frozen=True)
class Claim:
    """What a finding claims, checkable today: B against A on a metric."""

    metric: str
    a: str
    b: str
    direction: str                # one of DIRECTIONS; "b=a": the study's "differ little"
    ratio: float | None = None    # B/A as the study measured it, when it says


@dataclass(frozen=True)
class NotExpressible:
    reason: str                   # one of REASONS
    detail: str                   # names the feature, the software or the machine


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    section: str                  # occurs verbatim in the study's source text
    seeds: str                    # the first words of the SEEDS.md bullet it quotes
    figures: tuple[Figure, ...]
    claim: Claim
    not_expressible: NotExpressible | None = None
    # Words of the study's full text (in `section`) that give the figures, for a result
    # the digest leaves out: the figures are then checked against these words, and the
    # words against the full text (unfound_quotes), instead of against a digest bullet.
    quote: str = ""
    # Why the claim holds by construction (a 304 verified before measuring, a page and
    # its minified copy): shown as a demonstration and counted apart from the findings
    # that could have failed.
    demonstration: str = ""


@dataclass(frozen=True)
class Study:
    id: str
    title: str
    kind: str
    source: str                   # relative to REFERENCE
    method: str
    software: tuple[Software, ...]
    findings: tuple[Finding, ...]
    file: str                     # the findings file it was read from

    def finding(self, finding_id: str) -> Finding:
        for f in self.findings:
            if f.id == finding_id:
                return f
        raise NotFound(f"{self.id} has no finding {finding_id!r} ({self.file})")


class _Table:
    """One TOML table of a findings file, read key by key: every error names the file
    and the key's path, and a key nobody read is an error (a typo is never ignored)."""

    def __init__(self, file: str, where: str, data: Any):
        if not isinstance(data, Mapping):
            raise SpecError(file, where, data, "expected a table")
        self.file, self.where, self.data, self.read = file, where, data, set()

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def get(self, name: str, default: Any = ...) -> Any:
        self.read.add(name)
        if name not in self.data:
            if default is ...:
                raise SpecError(self.file, self.key(name), None, "missing")
            return default
        return self.data[name]

    def fail(self, name: str, problem: str) -> SpecError:
        return SpecError(self.file, self.key(name), self.data.get(name), problem)

    def text(self, name: str, *, empty: bool = False) -> str:
        value = self.get(name)
        if not isinstance(value, str) or (not empty and not value.strip()):
            raise self.fail(name, "expected a string" if empty else "expected a non-empty string")
        return value

    def choice(self, name: str, allowed: tuple[str, ...]) -> str:
        value = self.text(name)
        if value not in allowed:
            raise self.fail(name, f"expected one of {', '.join(allowed)}")
        return value

    def number(self, name: str, default: Any = ...) -> float | None:
        value = self.get(name, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(name, "expected a number")
        return float(value)

    def tables(self, name: str, *, empty: bool = True) -> list[_Table]:
        value = self.get(name, [])
        if not isinstance(value, list) or (not empty and not value):
            raise self.fail(name, "expected a list of tables" + ("" if empty else ", at least one"))
        return [_Table(self.file, f"{self.key(name)}[{i}]", v) for i, v in enumerate(value, 1)]

    def table(self, name: str) -> _Table | None:
        value = self.get(name, None)
        return None if value is None else _Table(self.file, self.key(name), value)

    def done(self) -> None:
        for name in self.data:
            if name not in self.read:
                raise self.fail(name, "unknown key")


def load_study(study_id: str, directory: Path = FINDINGS) -> Study:
    """The study's findings file, read and checked whole: one clear error (file, key,
    value) for the first thing wrong in it."""
    if study_id not in STUDY_IDS:
        raise NotFound(f"no study {study_id!r} (expected one of {', '.join(STUDY_IDS)})")
    path = directory / f"{study_id.lower()}.toml"
    file = (f"stacklab/studies/findings/{path.name}" if directory == FINDINGS else str(path))
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(file, "(file)", file, f"no findings for study {study_id}") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(file, "(syntax)", str(e), "not valid TOML") from None
    top = _Table(file, "", doc)
    s = _Table(file, "study", top.get("study"))
    if s.text("id") != study_id:
        raise s.fail("id", f"expected {study_id!r}, the study this file is named for")
    if not re.fullmatch(r"seeds/[\w.-]+\.txt", s.text("source")):
        raise s.fail("source", "expected seeds/<name>.txt (relative to shared/reference)")
    software = tuple(_software(t) for t in s.tables("software"))
    header = (s.text("title"), s.text("kind"), s.text("source"), s.text("method"))
    s.done()
    findings, seen = [], set()
    for t in top.tables("finding", empty=False):
        f = _finding(t)
        if f.id in seen:
            raise t.fail("id", "a second finding with this id")
        seen.add(f.id)
        findings.append(f)
    top.done()
    return Study(study_id, *header, software, tuple(findings), file)


def _software(t: _Table) -> Software:
    sw = Software(t.text("component"), t.text("name"), t.text("version", empty=True),
                  t.text("section"))
    t.done()
    return sw


def _finding(t: _Table) -> Finding:
    fid = t.text("id")
    if not KEBAB.fullmatch(fid):
        raise t.fail("id", "expected kebab-case (lower-case words joined by '-')")
    t.where = f"finding[{fid}]"        # the rest of its errors name it by id
    figures = []
    for raw in t.tables("figures"):
        figures.append(Figure(raw.number("value"), raw.text("unit"), raw.text("what")))
        raw.done()
    c = t.table("claim")
    if c is None:
        raise t.fail("claim", "missing")
    claim = Claim(c.text("metric"), c.text("a"), c.text("b"), c.choice("direction", DIRECTIONS),
                  c.number("ratio", None))
    if claim.ratio is not None and not _agrees(claim.ratio, claim.direction):
        raise c.fail("ratio", f"does not agree with direction {claim.direction!r}")
    c.done()
    ne = t.table("not_expressible")
    gone = None
    if ne is not None:
        gone = NotExpressible(ne.choice("reason", REASONS), ne.text("detail"))
        ne.done()
    quote = _plain(t.text("quote", empty=True)) if "quote" in t.data else ""
    seeds = _plain(t.text("seeds")) if not quote or "seeds" in t.data else ""
    demonstration = t.text("demonstration") if "demonstration" in t.data else ""
    finding = Finding(fid, t.text("title"), t.text("section"), seeds, tuple(figures), claim,
                      gone, quote, demonstration)
    t.done()
    return finding


def _agrees(ratio: float, direction: str) -> bool:
    """A ratio above 1 says b>a, below 1 b<a; b=a takes any positive ratio."""
    return ratio > 0 and (direction == "b=a" or (ratio > 1) == (direction == "b>a"))


def seeds_text(reference: Path | None = None) -> str:
    """SEEDS.md, the digest of the five studies: the package's copy (DIGEST, kept equal
    to shared/reference/SEEDS.md by a test), or the one in `reference`."""
    path = reference / "SEEDS.md" if reference else DIGEST
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFound(f"{path}: the studies' digest is not there (shared/reference "
                       "beside the repository)") from None


def seeds_section(seeds: str, study_id: str) -> str:
    """The study's section of SEEDS.md, from its heading to the next ("" when none)."""
    starts = [(m.group(1), m.start()) for m in _SECTION.finditer(seeds)]
    ends = [s for _, s in starts[1:]] + [len(seeds)]
    return next((seeds[s:e] for (sid, s), e in zip(starts, ends) if sid == study_id), "")


def seeds_bullets(seeds: str, study_id: str) -> list[tuple[str, str]]:
    """The bullets of the study's section of SEEDS.md, each as (bullet, the part of it
    that carries results: "" when none), its lines joined by single spaces."""
    section = seeds_section(seeds, study_id)
    has_block = re.search(r"^\*\*Results\*\*", section, re.M) is not None
    out: list[tuple[str, bool]] = []
    in_block = False
    for line in section.splitlines():
        if line.startswith("- "):
            out.append((line[2:].strip(), in_block))
        elif line[:1].isspace() and line.strip() and out:
            prev, block = out[-1]
            out[-1] = (prev + ("" if prev.endswith("/") else " ") + line.strip(), block)
        elif line.strip():                 # a paragraph or a block's bold heading
            in_block = line.startswith("**Results**")
    result = []
    for text, block in out:
        text = " ".join(text.split())
        cue = _RESULT_CUE.search(text)
        if cue:
            part = text[cue.end():]
        else:
            part = text if block or not has_block else ""
        result.append((text, part))
    return result


def result_numbers(text: str) -> list[float]:
    """The numbers of a result text, the spans in CONDITIONS cut out first."""
    return [float(m.group(2).replace(",", "") + (m.group(3) or ""))
            * (-1 if m.group(1) in ("-", "\u2212") else 1)
            for m in _NUMBER.finditer(_CONDITION.sub(" ", text))]


def all_numbers(text: str) -> list[float]:
    """Every number of a text, conditions and code included."""
    return [float(m.group(2).replace(",", "") + (m.group(3) or ""))
            for m in _NUMBER.finditer(text)]


# A number as the full texts write it: units glued on (8MB, 0.04ms, 2x), a decimal
# comma (3,6MB; 0,08 ms), a thousands comma (1,571), a k for thousands (2.2k).
_QUOTED = re.compile(r"(?<![\d.,])(\d+)(?:([.,])(\d+))?(k(?![A-Za-z]))?")


def quote_numbers(text: str) -> list[float]:
    """Every number a quote from a full text may mean: "3,6MB" is 3.6, "1,571" both 1.571
    and 1571 (a figure is checked to be among them, so reading both costs nothing), "2.2k"
    both 2.2 and 2200."""
    out = []
    for m in _QUOTED.finditer(text):
        whole, sep, part, k = m.groups()
        values = [float(f"{whole}.{part}")] if part else [float(whole)]
        if sep == "," and part and len(part) == 3:
            values.append(float(whole + part))
        out += values + ([v * 1000 for v in values] if k else [])
    return out


def quoting(study: Study, bullet: str) -> list[Finding]:
    """The findings that quote this bullet: its text starts with their `seeds`."""
    return [f for f in study.findings if f.seeds and bullet.startswith(f.seeds)]


def _key(value: float) -> float:
    return round(abs(value), 6)


def missing_figures(study: Study, seeds: str,
                    not_results: Mapping[str, Mapping[str, str]] = NOT_RESULTS) -> list[str]:
    """Each result number of the study's SEEDS.md bullets that no finding quoting that
    bullet has among its figures, as "1571 in 'Static photos, siege, by…'"."""
    skip = tuple(not_results.get(study.id, {}))
    missing = []
    for bullet, part in seeds_bullets(seeds, study.id):
        if not part or bullet.startswith(skip):
            continue
        want = Counter(_key(v) for v in result_numbers(part))
        have = Counter(_key(fig.value) for f in quoting(study, bullet) for fig in f.figures)
        short = " ".join(bullet.split()[:4])
        for value, n in sorted((want - have).items()):
            missing += [f"{value:g} in '{short}…'"] * n
    return missing


def unquoted_figures(study: Study, seeds: str) -> list[str]:
    """Each figure whose value is not a number of the bullet its finding quotes (a
    figure typed rather than quoted), or whose finding quotes no bullet of the study."""
    bullets = [b for b, _ in seeds_bullets(seeds, study.id)]
    out = []
    for f in study.findings:
        if f.quote:
            values = {_key(v) for v in quote_numbers(f.quote)}
            out += [f"{f.id}: {fig.value:g} {fig.unit} ({fig.what}) is not in its quote"
                    for fig in f.figures if _key(fig.value) not in values]
            continue
        mine = [b for b in bullets if b.startswith(f.seeds)]
        if not mine:
            out.append(f"{f.id}: seeds {f.seeds!r} starts no bullet of {study.id} in SEEDS.md")
            continue
        values = {_key(v) for b in mine for v in all_numbers(b)}
        out += [f"{f.id}: {fig.value:g} {fig.unit} ({fig.what}) is not in its bullet"
                for fig in f.figures if _key(fig.value) not in values]
    return out


def _plain(text: str) -> str:
    """Text with its whitespace runs made single spaces (a quote spans line breaks)."""
    return " ".join(text.split())


def unfound_quotes(study: Study, source: str) -> list[str]:
    """Each finding whose quote is not in the study's full text, word for word."""
    text = _plain(source)
    return [f"{f.id}: quote {f.quote!r} is not in {study.source}"
            for f in study.findings if f.quote and f.quote not in text]
