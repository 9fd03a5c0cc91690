"""Every result the five studies report (stacklab/studies/results.toml), each naming the
findings that answer it.

The digest SEEDS.md leaves dozens of the studies' results out, so counting findings
against the digest alone hides them. This list is taken from the full texts instead (an
outside reading, FINDINGS-AUDIT.md §1): one entry per result, with the study's own
section words and the ids of the findings of findings/sN.toml that answer it. The checks
below say which results no finding answers yet, which ids name no finding, which
findings answer no result, and which sections are not the study's words."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import SpecError
from .findings import KEBAB, STUDY_IDS, Study

RESULTS = Path(__file__).parent / "results.toml"
_KEYS = ("study", "n", "section", "what", "findings")


@dataclass(frozen=True)
class Result:
    study: str                    # one of STUDY_IDS
    n: int                        # its number in the audit's table for the study
    section: str                  # the study's section (or slide) words, verbatim
    what: str                     # the result in one line
    findings: tuple[str, ...]     # ids in findings/<study>.toml; () while none answers it

    @property
    def label(self) -> str:
        return f"{self.study} #{self.n}"


def load_results(path: Path = RESULTS) -> tuple[Result, ...]:
    """The list, read and checked whole: one clear error (file, key, value) for the first
    thing wrong, and each study's results numbered 1, 2, … in order."""
    file = "stacklab/studies/results.toml" if path == RESULTS else str(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(file, "(file)", file, "no list of the studies' results") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(file, "(syntax)", str(e), "not valid TOML") from None
    extra = sorted(set(doc) - {"result"})
    if extra:
        raise SpecError(file, extra[0], doc[extra[0]], "unknown key (expected [[result]])")
    rows = doc.get("result")
    if not isinstance(rows, list) or not rows:
        raise SpecError(file, "result", rows, "expected a list of [[result]] tables")
    out: list[Result] = []
    for i, raw in enumerate(rows, 1):
        result = _result(raw, file, f"result[{i}]")
        last = max((r.n for r in out if r.study == result.study), default=0)
        if result.n != last + 1:
            raise SpecError(file, f"result[{i}].n", result.n,
                            f"expected {last + 1}, the next number of {result.study}")
        out.append(result)
    return tuple(out)


def _result(raw: Any, file: str, where: str) -> Result:
    if not isinstance(raw, Mapping):
        raise SpecError(file, where, raw, "expected a table")
    for key in _KEYS:
        if key not in raw:
            raise SpecError(file, f"{where}.{key}", None, "missing")
    extra = sorted(set(raw) - set(_KEYS))
    if extra:
        raise SpecError(file, f"{where}.{extra[0]}", raw[extra[0]],
                        f"unknown key (expected {', '.join(_KEYS)})")
    if raw["study"] not in STUDY_IDS:
        raise SpecError(file, f"{where}.study", raw["study"],
                        f"expected one of {', '.join(STUDY_IDS)}")
    if isinstance(raw["n"], bool) or not isinstance(raw["n"], int):
        raise SpecError(file, f"{where}.n", raw["n"], "expected a whole number")
    for key in ("section", "what"):
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise SpecError(file, f"{where}.{key}", raw[key], "expected a non-empty string")
    ids = raw["findings"]
    if not isinstance(ids, list) or not all(isinstance(f, str) and KEBAB.fullmatch(f)
                                            for f in ids):
        raise SpecError(file, f"{where}.findings", ids,
                        "expected a list of finding ids (kebab-case), [] when none yet")
    return Result(raw["study"], raw["n"], raw["section"], raw["what"], tuple(ids))


def counts(results: Iterable[Result]) -> dict[str, int]:
    """How many results each study reports."""
    out = dict.fromkeys(STUDY_IDS, 0)
    for r in results:
        out[r.study] += 1
    return out


def uncovered(results: Iterable[Result]) -> list[str]:
    """The results no finding answers yet, as "S5 #3"."""
    return [r.label for r in results if not r.findings]


def unknown_findings(results: Iterable[Result], studies: Mapping[str, Study]) -> list[str]:
    """Each finding id a result names that its study's findings file does not have."""
    out = []
    for r in results:
        have = {f.id for f in studies[r.study].findings}
        out += [f"{r.label}: no finding {fid!r} in {studies[r.study].file}"
                for fid in r.findings if fid not in have]
    return out


def unclaimed_findings(results: Iterable[Result], studies: Mapping[str, Study]) -> list[str]:
    """Each finding no result names: a finding without a result of the study's text."""
    named = {(r.study, fid) for r in results for fid in r.findings}
    return [f"{sid} {f.id}" for sid, study in studies.items() for f in study.findings
            if (sid, f.id) not in named]


def unfound_sections(results: Iterable[Result], sources: Mapping[str, str]) -> list[str]:
    """Each result whose section words are not in its study's full text."""
    return [f"{r.label}: {r.section!r}" for r in results if r.section not in sources[r.study]]
