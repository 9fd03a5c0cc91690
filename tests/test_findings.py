"""The five studies' findings (stacklab/studies/findings/*.toml) against SEEDS.md and the
studies' full texts: every result number of SEEDS.md is quoted by a finding, every figure
comes from its bullet, every section is the source's own, and bad data gives one error
naming the file and the key."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from stacklab.errors import SpecError
from stacklab.studies.findings import (CONDITIONS, FINDINGS, NOT_RESULTS, REASONS, REFERENCE,
                                       STUDY_IDS, Study, load_study, missing_figures,
                                       result_numbers, seeds_bullets, seeds_text,
                                       quote_numbers, unfound_quotes, unquoted_figures)

# The full texts are not in the repository (their prose does not carry over): the checks
# against them run where shared/reference lies beside the clone, and say so otherwise.
needs_sources = pytest.mark.skipif(not (REFERENCE / "seeds").is_dir(),
                                   reason="shared/reference/seeds (the studies' full texts) "
                                   "not beside the repository")

# How many result numbers the extraction rule finds in each study's SEEDS.md section:
# pinned, so a change of the rule (or of SEEDS.md) that drops numbers is seen.
RESULT_NUMBERS = {"S1": 89, "S2": 28, "S3": 12, "S4": 16, "S5": 11}


@pytest.fixture(scope="module")
def seeds() -> str:
    return seeds_text()


def numbers(text: str) -> list[float]:
    return result_numbers(text)


# --- the extraction rule ------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("apache 332/404/417/409/", [332, 404, 417, 409]),
    ("lighttpd 910/1571", [910, 1571]),
    ("1,571 and 55,868→9,660", [1571, 55868, 9660]),
    ("varnish 751–1067 (≈2.5× apache)", [751, 1067, 2.5]),
    ("Ramdisk: −8% avg., nginx pass-through −12%", [-8, -12]),
    ("+68% on average, test 3 up to 6×.", [68, 6]),
    ("Static photos, siege, by concurrency 1/2/5/10/50/150: apache 332", [332]),
    ("Large files (req/s and MB/s at 1/50/150): apache 9.1/9.1/2.95", [9.1, 9.1, 2.95]),
    ("MPM (test 1 at c=50): prefork 1872", [1872]),
    ("ext4/ReiserFS ≈ +7% over ext3 (up to +15%)", [7, 15]),
    ("`ab -n 10000 -c 100`. Static 1,200–1,300 req/s", [1200, 1300]),
    ("4,000 requests of the 126 KB page over a limited link: 67.1 → 304.6 req/s", [67.1, 304.6]),
    ("100 Mb vs 1 Gb link: +300 req/s", [300]),
    ("c=500 544 vs 2,048 req/s; 1,377/1,320 (c=50/500)", [544, 2048, 1377, 1320]),
    ("100 processes = 43 MB → 430 KB each", [43, 430]),
    ("gzip level 1 cuts the page by 72%, levels 5 and 9 add nothing", [72]),
    ("static +24% (files ~20 MB, disk-bound)", [24]),
    ("ETag/If-None-Match → 304); output compression", []),
    ("Celeron, P4, Xeon", []),
])
def test_result_numbers(text, expected):
    assert numbers(text) == expected


def test_every_condition_has_a_reason():
    assert all(pattern and reason for pattern, reason in CONDITIONS)


def test_s1_counts_only_its_results_block_and_the_overview_result(seeds):
    """S1's method and options bullets (StartServers, buffer sizes, the file set) are not
    results; its overview bullet counts from "Result on the model app:" on."""
    parts = {" ".join(b.split()[:2]): p for b, p in seeds_bullets(seeds, "S1")}
    assert parts["MySQL: `key_buffer_size`"] == "" and parts["Static content:"] == ""
    assert numbers(parts['"Overview method"']) == [0.86, 27, 0.68, 21, 0.36, 11, 1.3, 41]
    assert numbers(parts["Real server:"]) == [24, 43, 34]


@pytest.mark.parametrize("sid", STUDY_IDS)
def test_result_numbers_pinned(seeds, sid):
    skip = tuple(NOT_RESULTS.get(sid, {}))
    found = [v for b, p in seeds_bullets(seeds, sid) if p and not b.startswith(skip)
             for v in numbers(p)]
    assert len(found) == RESULT_NUMBERS[sid]


@pytest.mark.parametrize("sid", STUDY_IDS)
def test_each_exclusion_names_one_bullet_with_numbers_and_a_reason(seeds, sid):
    bullets = [b for b, _ in seeds_bullets(seeds, sid)]
    for prefix, reason in NOT_RESULTS.get(sid, {}).items():
        hits = [b for b in bullets if b.startswith(prefix)]
        assert len(hits) == 1, f"{sid}: NOT_RESULTS {prefix!r} starts {len(hits)} bullets"
        assert any(c.isdigit() for c in hits[0]), f"{sid}: {prefix!r} has no number to exclude"
        assert reason.strip(), f"{sid}: {prefix!r} without a reason"


def test_s1_excludes_nothing():
    """S1's results are its **Results** block: no bullet needs excluding by name."""
    assert "S1" not in NOT_RESULTS


# --- each study's findings -----------------------------------------------------------

@pytest.fixture(scope="module", params=STUDY_IDS)
def study(request) -> Study:
    return load_study(request.param)


def test_every_seeds_result_number_is_a_figure(study, seeds):
    assert missing_figures(study, seeds) == []


def test_every_figure_is_quoted_from_its_bullet(study, seeds):
    assert unquoted_figures(study, seeds) == []


def test_seeds_prefix_starts_a_bullet_of_the_study(study, seeds):
    bullets = [b for b, _ in seeds_bullets(seeds, study.id)]
    assert bullets, f"no section {study.id} in SEEDS.md"
    wrong = [f.id for f in study.findings
             if not f.quote and not any(b.startswith(f.seeds) for b in bullets)]
    assert wrong == []


@needs_sources
def test_quotes_occur_word_for_word_in_the_source(study):
    """A finding for a result the digest leaves out quotes the full text instead: its
    words must be the study's own (whitespace aside)."""
    assert unfound_quotes(study, (REFERENCE / study.source).read_text(encoding="utf-8")) == []


def test_a_quote_stands_for_the_bullet_and_its_figures_come_from_it(tmp_path, seeds):
    """With a quote, the figures are checked against it (a typed figure is still seen),
    the digest's bullet is not needed, and a quote not in the text is reported."""
    text = (FINDINGS / "s4.toml").read_text(encoding="utf-8")
    text += ('\n[[finding]]\nid = "peak-mbps"\ntitle = "Peak"\nsection = "x"\n'
             'quote = "606 MB/s at -c 8"\n'
             'figures = [ { value = 606, unit = "MB/s", what = "peak" },'
             ' { value = 7, unit = "x", what = "typed" } ]\n'
             'claim = { metric = "mbps", a = "a", b = "b", direction = "b>a" }\n')
    (tmp_path / "s4.toml").write_text(text, encoding="utf-8")
    study = load_study("S4", tmp_path)
    assert unquoted_figures(study, seeds) == ["peak-mbps: 7 x (typed) is not in its quote"]
    assert missing_figures(study, seeds) == []
    # (the file's own quoted findings are not in these made-up texts: only peak-mbps counts)
    found = unfound_quotes(study, "a talk with 606 MB/s at -c 8 in it")
    assert [q for q in found if q.startswith("peak-mbps")] == []
    assert (f"peak-mbps: quote '606 MB/s at -c 8' is not in {study.source}"
            in unfound_quotes(study, "another talk"))


@needs_sources
def test_the_packaged_digest_is_shared_reference_seeds_md():
    assert seeds_text() == (REFERENCE / "SEEDS.md").read_text(encoding="utf-8")


@needs_sources
def test_sections_occur_verbatim_in_the_source(study):
    source = (REFERENCE / study.source).read_text(encoding="utf-8")
    wrong = [f"{f.id}: {f.section!r}" for f in study.findings if f.section not in source]
    wrong += [f"software {s.name}: {s.section!r}" for s in study.software
              if s.section not in source]
    assert wrong == []


def test_ids_unique_and_reasons_from_the_list(study):
    ids = [f.id for f in study.findings]
    assert len(ids) == len(set(ids))
    assert all(f.not_expressible is None or f.not_expressible.reason in REASONS
               for f in study.findings)
    assert study.software, f"{study.id} names no software"


def test_s1_findings():
    s1 = load_study("S1")
    gone = {f.id: f.not_expressible.reason for f in s1.findings if f.not_expressible}
    assert len(s1.findings) == 40
    assert gone == {"filesystem-reiserfs": "kernel-feature", "filesystem-jfs": "kernel-feature",
                    "opcode-caches-gone": "software-gone"}


# --- the check can fail ----------------------------------------------------------------

def drop(study: Study, finding_id: str, value: float | None = None) -> Study:
    """The study without one finding (value None) or without one figure of it."""
    out = []
    for f in study.findings:
        if f.id == finding_id and value is None:
            continue
        if f.id == finding_id:
            figs = list(f.figures)
            figs.remove(next(g for g in figs if g.value == value))
            f = dataclasses.replace(f, figures=tuple(figs))
        out.append(f)
    return dataclasses.replace(study, findings=tuple(out))


def test_a_dropped_figure_is_reported(seeds):
    s1 = load_study("S1")
    assert missing_figures(drop(s1, "static-photos-lighttpd", 1571), seeds) == [
        "1571 in 'Static photos, siege, by…'"]


def test_a_figure_needed_twice_is_counted_twice(seeds):
    """"64/41/41 MB/s": nginx's 41 at c=50 and at c=150 are two figures."""
    s1 = load_study("S1")
    assert missing_figures(drop(s1, "large-files-high-concurrency", 41), seeds) == [
        "41 in 'Large files (req/s and…'"]


def test_a_dropped_finding_reports_all_its_numbers(seeds):
    s1 = load_study("S1")
    assert missing_figures(drop(s1, "overview-breakdown"), seeds) == [
        f"{v:g} in '\"Overview method\" (where does…'"
        for v in sorted([0.86, 27, 0.68, 21, 0.36, 11, 1.3, 41])]


def test_a_typed_figure_is_reported(seeds):
    s1 = load_study("S1")
    f = s1.finding("mysql-tuning")
    typed = dataclasses.replace(f, figures=f.figures + (dataclasses.replace(f.figures[0], value=1.68),))
    s1 = dataclasses.replace(s1, findings=tuple(typed if x is f else x for x in s1.findings))
    assert unquoted_figures(s1, seeds) == ["mysql-tuning: 1.68 % (tuned over default, mean over "
                                          "tests 1-4) is not in its bullet"]


# --- bad data: one error naming the file and the key -----------------------------------

@pytest.mark.parametrize("old, new, key", [
    ('reason = "software-gone"', 'reason = "too-old"', "finding[opcode-caches-gone].not_expressible.reason"),
    ('direction = "b<a" }\n\n# --- dynamic content: Apache', 'direction = "up" }\n\n# --- dynamic content: Apache',
     "finding[ramdisk].claim.direction"),
    ('ratio = 0.92', 'ratio = 1.08', "finding[ramdisk].claim.ratio"),
    ('id = "mpm-itk"', 'id = "mpm-worker-fastcgi"', "finding[mpm-worker-fastcgi].id"),
    ('id = "mpm-itk"', 'id = "MPM itk"', "finding[16].id"),
    ('{ value = 381,', '{ value = "381",', "finding[mpm-itk].figures[2].value"),
    ('seeds = "Unneeded modules off"', 'seed = "Unneeded modules off"', "finding[unneeded-modules].seeds"),
    ('seeds = "Unneeded modules off"', 'seeds = "Unneeded modules off"\ncolour = "red"',
     "finding[unneeded-modules].colour"),
    ('id = "S1"', 'id = "S2"', "study.id"),
    ('version = "2.2.9"', 'versoin = "2.2.9"', "study.software[3].version"),
])
def test_bad_data_names_file_and_key(tmp_path, old, new, key):
    text = (FINDINGS / "s1.toml").read_text(encoding="utf-8")
    assert old in text
    (tmp_path / "s1.toml").write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(SpecError) as e:
        load_study("S1", tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 's1.toml'}: {key}")


def test_bad_toml_and_missing_file(tmp_path):
    shutil.copy(FINDINGS / "s1.toml", tmp_path / "s1.toml")
    (tmp_path / "s1.toml").write_text("[study\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_study("S1", tmp_path)
    with pytest.raises(SpecError, match="no findings for study S2"):
        load_study("S2", tmp_path)


@pytest.mark.parametrize("text, expected", [
    ("Apache 3,6MB, Boa 0,53", [3.6, 0.53]),
    ("ungefär 0.04ms, 8MB mer", [0.04, 8]),
    ("2x snabbare", [2]),
    ("1,571 req/s", [1.571, 1571]),
    ("över 2.2k rps", [2.2, 2200]),
    ("rps达到2.2k以上", [2.2, 2200]),
])
def test_quote_numbers_read_the_full_texts_way_of_writing(text, expected):
    assert quote_numbers(text) == pytest.approx(expected)
