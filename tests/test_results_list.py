"""The list of every result the five studies report (stacklab/studies/results.toml)
against the findings: the counts per study are the full texts', every id named is a
finding, every finding answers a result, the sections are the studies' own words, and
the results no finding answers yet are pinned, so adding (or losing) one is seen."""

from __future__ import annotations

import pytest

from stacklab.errors import SpecError
from stacklab.studies.findings import REFERENCE, STUDY_IDS, load_study
from stacklab.studies.results import (RESULTS, counts, load_results, unclaimed_findings,
                                      uncovered, unfound_sections, unknown_findings)

# The full texts are not in the repository (their prose does not carry over): the section
# check runs where shared/reference lies beside the clone, and says so otherwise.
needs_sources = pytest.mark.skipif(not (REFERENCE / "seeds").is_dir(),
                                   reason="shared/reference/seeds (the studies' full texts) "
                                   "not beside the repository")

# The audit's count of each study's results (FINDINGS-AUDIT.md §1).
COUNTS = {"S1": 37, "S2": 24, "S3": 8, "S4": 15, "S5": 27}

# The results no finding answers yet. This list must shrink to [] as findings are
# added: remove a result here when its finding is added to results.toml (the test fails
# until then, and also when a result loses its finding).
UNCOVERED = [
]


@pytest.fixture(scope="module")
def results():
    return load_results()


@pytest.fixture(scope="module")
def studies():
    return {sid: load_study(sid) for sid in STUDY_IDS}


def test_counts_per_study(results):
    assert counts(results) == COUNTS
    assert len(results) == 111


def test_every_finding_id_named_exists(results, studies):
    assert unknown_findings(results, studies) == []


def test_every_finding_answers_a_result(results, studies):
    """A finding no result names is a claim without a result of the study's text (or a
    result missing from the list): either way it is seen here."""
    assert unclaimed_findings(results, studies) == []


@needs_sources
def test_sections_occur_verbatim_in_the_source(results, studies):
    sources = {sid: (REFERENCE / s.source).read_text(encoding="utf-8")
               for sid, s in studies.items()}
    assert unfound_sections(results, sources) == []


def test_results_without_a_finding_are_the_known_ones(results):
    """The results the project does not cover yet: reported by name, to be emptied."""
    assert uncovered(results) == UNCOVERED


# --- bad data: one error naming the file and the key -----------------------------------

@pytest.mark.parametrize("old, new, key", [
    ('study = "S1"\nn = 1\n', 'study = "S6"\nn = 1\n', "result[1].study"),
    ('study = "S1"\nn = 2\n', 'study = "S1"\nn = 3\n', "result[2].n"),
    ('study = "S1"\nn = 1\n', 'study = "S1"\nn = "1"\n', "result[1].n"),
    ('findings = ["overview-breakdown"]', 'findings = "overview-breakdown"', "result[1].findings"),
    ('findings = ["overview-breakdown"]', 'findings = ["Overview breakdown"]', "result[1].findings"),
    ('findings = ["overview-breakdown"]', 'findings = ["overview-breakdown"]\nseen = 1',
     "result[1].seen"),
    ('findings = ["overview-breakdown"]', '', "result[1].findings"),
])
def test_bad_data_names_file_and_key(tmp_path, old, new, key):
    text = RESULTS.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "results.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(SpecError) as e:
        load_results(path)
    assert str(e.value).startswith(f"{path}: {key}")


def test_an_unknown_id_and_an_unclaimed_finding_are_reported(tmp_path, studies):
    text = RESULTS.read_text(encoding="utf-8").replace(
        'findings = ["overview-breakdown"]', 'findings = ["overview-brekdown"]', 1)
    path = tmp_path / "results.toml"
    path.write_text(text, encoding="utf-8")
    results = load_results(path)
    assert unknown_findings(results, studies) == [
        "S1 #1: no finding 'overview-brekdown' in stacklab/studies/findings/s1.toml"]
    assert unclaimed_findings(results, {"S1": studies["S1"]}) == ["S1 overview-breakdown"]
