"""The study report from fake study data (no server): each finding's verdict in the one
vocabulary (better, worse, same, no-verdict with a reason code) in the study JSON, a
finding beyond a busy host's reach keeping its verdict; the sources cited are the ones
the package ships; and the HTML page opened in headless Chromium: a forest plot on a log
axis, the `?` before a bound explained, nothing fetched, every link to a shipped file,
a Chinese section title drawn with real glyphs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from rich.console import Console

import stacklab
from stacklab.analysis.analyze import REASONS, VERDICTS, Estimate, ExperimentView, TrialSummary
from stacklab.stacks import REGISTRY
from stacklab.studies.findings import (DIGEST, REFERENCE, STUDY_IDS, Claim, Figure, Finding,
                                       NotExpressible, Software, Study, load_study)
from stacklab.studies.plans import Check, Step
from stacklab.studies.report import (BOUND_MARKS, SOURCES, StudyReport, counts_text, forest_plot,
                                     print_study, study_document, write_study_html)
from stacklab.studies.verdict import rows

from helpers import ROOT, launch_chromium, watched_page

ARTIFACTS = ROOT / "tests" / "artifacts"
CJK_SECTION = "php/session 进一步讨论"       # S3's own section title (its source is Chinese)
PACKAGE = Path(stacklab.__file__).resolve().parent


def trial(tid: str, rps: list[float], flags: tuple[str, ...] = (),
          disturbance: float = 1.0) -> TrialSummary:
    none = Estimate(None, None, ())
    return TrialSummary(
        trial_id=tid, label=f"trial {tid}", stack=tid, workload="static-page",
        concurrency=16, knobs={}, runs_ok=len(rps), runs_failed=0, rps=Estimate.of(rps),
        mbps=none, latency_us=None, latency_runs_us={}, cpu_us_per_request={},
        engine_cpu_us_per_request=none, rss_mib_peak={}, pss_mib_per_worker={}, errors=0,
        flagged=flags, reasons=(), disturbance=disturbance)


A = [1000.0, 1020.0, 980.0, 1010.0]
# (finding, direction then, ratio then, A's trial, B's trial, section)
CASES = [
    ("faster", "b>a", 2.0, trial("a1", A), trial("b1", [1800.0, 1850.0, 1780.0, 1820.0]),
     "apache/php 问题测试过程"),
    ("reversed", "b>a", 1.5, trial("a2", A), trial("b2", [700.0, 720.0, 690.0, 705.0]),
     "apache/php 性能提升效果"),
    # one core of other work cannot slow a side 20×: the verdict stands
    ("busy-beyond", "b<a", 0.1, trial("a3", A, ("host-busy",), 1.9),
     trial("b3", [50.0, 52.0, 49.0, 51.0], ("host-busy",), 1.9), CJK_SECTION),
    # nor is 1.3× vetoed by the worst case of what it could have done (1.9× a side)
    ("busy-within", "b>a", 1.2, trial("a4", A, ("host-busy",), 1.9),
     trial("b4", [1300.0, 1320.0, 1290.0, 1310.0]), CJK_SECTION),
    ("both-limited", "b>a", None, trial("a5", A, ("generator-bound",)),
     trial("b5", [1500.0, 1510.0, 1490.0, 1505.0], ("generator-bound",)), CJK_SECTION),
    ("alike", "b=a", None, trial("a6", A), trial("b6", [1005.0, 1015.0, 990.0, 1000.0]),
     CJK_SECTION),
]
EXPECTED = {  # finding -> (verdict, reason, direction)
    "faster": ("better", None, "holds"),
    "reversed": ("worse", None, "reversed"),
    "busy-beyond": ("worse", None, "holds"),
    "busy-within": ("better", None, "holds"),
    "both-limited": ("no-verdict", "generator-bound", "no verdict"),
    "alike": ("same", None, "holds"),
}


def fake_study() -> tuple[Study, StudyReport]:
    """S3's source and sections, six measured findings (one per kind of verdict), one
    not expressible and one not measured."""
    findings = [Finding(fid, f"finding {fid}", section, "", (Figure(1.0, "req/s", "x"),),
                        Claim("rps", a.label, b.label, direction, ratio))
                for fid, direction, ratio, a, b, section in CASES]
    findings += [Finding("shown", "holds by construction", CJK_SECTION, "", (),
                         Claim("rps", "a7", "b7", "b>a", 2.0),
                         demonstration="the run was verified to do it before measuring"),
                 Finding("gone", "a kernel feature gone", CJK_SECTION, "", (),
                         Claim("rps", "a", "b", "b>a"),
                         NotExpressible("kernel-feature", "not in Linux 6")),
                 Finding("unplanned", "not planned", CJK_SECTION, "", (),
                         Claim("rps", "a", "b", "b>a"))]
    study = Study("S3", "a fake study", "blog post, China", load_study("S3").source,
                  "ab on localhost", (Software("apache", "Apache httpd", "2.2.19",
                                               "apache/php 问题测试过程"),),
                  tuple(findings), "fake.toml")
    step = Step("fake", {}, {}, (), "")
    shown = (trial("a7", A), trial("b7", [2000.0, 2040.0, 1960.0, 2020.0]))
    checks = {fid: (step, Check(fid, "rps", {"stack": a.stack}, {"stack": b.stack}))
              for fid, _, _, a, b, _ in [*CASES, ("shown", "", 0, *shown, "")]}
    view = ExperimentView(id=1, name="study-fake", description="", created_at="t",
                          status="complete", host={"kernel": "6.1"}, commit=None,
                          versions={}, summaries=[*(s for c in CASES for s in c[3:5]), *shown],
                          runs=[])
    found = rows(study.findings, checks, {"fake": view}.__getitem__, REGISTRY,
                 {"unplanned": "no check"})
    return study, StudyReport(study, True, found, {"apache": "2.4.62"}, view.host,
                              [("study-fake", "complete")], [])


@pytest.fixture(scope="module")
def report() -> StudyReport:
    return fake_study()[1]


def test_each_finding_carries_one_verdict_of_the_one_vocabulary(report):
    doc = json.loads(json.dumps(study_document(report), allow_nan=False))
    got = {f["id"]: (f["verdict"], f["reason"], f["direction"]) for f in doc["findings"]}
    assert got == {**{k: (v, r, d.replace(" ", "-")) for k, (v, r, d) in EXPECTED.items()},
                   "shown": ("better", None, "holds"),
                   "gone": ("no-verdict", "no-data", None),
                   "unplanned": ("no-verdict", "no-data", None)}
    for f in doc["findings"]:
        assert f["verdict"] in VERDICTS
        assert (f["reason"] is None) == (f["verdict"] != "no-verdict")
        assert f["reason"] is None or f["reason"] in REASONS
        assert "significant" not in json.dumps(f)     # no boolean beside the verdict


def test_a_busy_host_is_recorded_never_widens_the_interval(report):
    """Both sides of busy-beyond ran beside other work (a worst-case bound of 1.9× each):
    the host is recorded with the finding, and where the ratio can lie is its interval
    itself (it used to be widened by both factors, which vetoed busy-within's 1.3×)."""
    doc = {f["id"]: f for f in study_document(report)["findings"]}
    beyond, within = doc["busy-beyond"]["now"], doc["busy-within"]["now"]
    assert beyond["host"]["slowdown_a"] == within["host"]["slowdown_a"] == 1.9
    for now in (beyond, within):
        assert (now["reach_low"], now["reach_high"]) == (now["ci_low"], now["ci_high"])
    assert beyond["reach_high"] < 1 < within["reach_low"]
    assert doc["both-limited"]["now"]["bound"]["relation"] == "?"
    assert doc["both-limited"]["now"]["reach_low"] is None


def test_the_text_report_explains_the_marks_and_cites_the_digest(report):
    out = Console(record=True, width=200)
    print_study(report, out)
    text = " ".join(out.export_text().split())
    assert "SEEDS.md § S3" in text and "apache/php 性能大幅提升关键参数" in text
    assert "? not a measurement" in text
    assert "no verdict (generator-bound)" in text and "ran on a busy host" in text
    assert "seeds/002" not in text                 # the full text does not ship


def test_the_forest_plot_has_a_row_per_finding_on_a_log_axis(report):
    drawn = forest_plot(report)
    layout = drawn.figure["layout"]
    assert layout["xaxis"]["type"] == "log"
    assert drawn.data["rows"] == [f.id for f in report.study.findings]
    by_name = {t.get("name"): t for t in drawn.figure["data"]}
    assert by_name["the study's figure"]["x"] == [2.0, 1.5, 0.1, 1.2, 2.0]   # shown: 2.0
    assert set(by_name) >= {"holds", "reversed", "no verdict"}
    assert "where a limited side leaves it" not in by_name      # no ≥/≤ bound here
    assert by_name["no verdict"]["marker"]["symbol"] == ["circle-open"]   # both-limited
    assert [s["x0"] for s in layout["shapes"]] == [1]
    low, high = (10 ** x for x in layout["xaxis"]["range"])
    assert low < 0.05 and high > 2.0               # every ratio and figure inside


def test_every_study_cites_a_known_source_and_none_ships():
    """The full texts grant no right to redistribute them (SOURCES says why for each):
    none lies in the package, every study's source is among them."""
    for sid in STUDY_IDS:
        assert load_study(sid).source in SOURCES
    assert not list(PACKAGE.rglob("*_*.txt")), "a full text in the package"
    assert DIGEST.is_file() and DIGEST.is_relative_to(PACKAGE)


@pytest.mark.skipif(not (REFERENCE / "seeds").is_dir(),
                    reason="shared/reference/seeds (the studies' full texts) not beside "
                    "the repository")
def test_each_sources_title_and_notice_are_its_own():
    for name, src in SOURCES.items():
        text = " ".join((REFERENCE / name).read_text(encoding="utf-8").split()).casefold()
        assert src.title.casefold() in text, name
        assert src.notice.casefold() in text, name
        if not src.notice:        # no notice of its own: nothing in it grants a licence
            assert "licen" not in text and "©" not in text, name


def cjk_font_installed() -> bool:
    try:
        out = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    return bool(out.strip())


# Two different Chinese characters drawn with the span's own font: a missing font draws
# both as the same empty box (.notdef), real glyphs differ.
GLYPHS_DIFFER = """(el) => {
  const font = getComputedStyle(el).fontSize + " " + getComputedStyle(el).fontFamily;
  const draw = (ch) => {
    const c = document.createElement("canvas"); c.width = 40; c.height = 40;
    const g = c.getContext("2d"); g.font = font; g.fillStyle = "#000";
    g.textBaseline = "top"; g.fillText(ch, 2, 2);
    return Array.from(g.getImageData(0, 0, 40, 40).data).join(",");
  };
  const [a, b] = [draw("进"), draw("讨")];
  return a !== b && /[^0,]/.test(a);
}"""


def links_resolve(page, page_file: Path) -> list[str]:
    """Every href: an anchor of the page or a file in the package, nothing else."""
    problems = []
    ids = set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"))
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    for href in hrefs:
        if href.startswith("#"):
            if href[1:] not in ids:
                problems.append(f"{href}: no such anchor")
            continue
        if urlparse(href).scheme:
            problems.append(f"{href}: leaves the page")
            continue
        target = (page_file.parent / unquote(href)).resolve()
        if not target.is_file() or not target.is_relative_to(PACKAGE):
            problems.append(f"{href}: not a file the package ships")
    return problems


def test_study_report_opens_in_headless_chromium(report, tmp_path):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        pytest.fail(f"Playwright is missing ({e}): `make test` installs it into .venv")
    assert cjk_font_installed(), ("no CJK font: scripts/install-deps.sh --test installs "
                                  "fonts-noto-cjk")
    page_file = write_study_html(report, tmp_path / "deep" / "study.html")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page, errors, requests = watched_page(browser, 1300)
            page.goto(page_file.as_uri())
            forest = page.locator("#forest .plot")
            forest.locator(".main-svg").first.wait_for(timeout=10000)
            # a log axis: Plotly draws the ticks it was given, 1× among them
            ticks = forest.locator(".xtick text").all_text_contents()
            assert "1×" in ticks and "0.05×" in ticks, ticks
            assert page.evaluate("() => document.querySelector('#forest .plot')"
                                 "._fullLayout.xaxis.type") == "log"
            assert forest.locator(".ytick text").count() == len(report.rows)
            assert forest.locator(".legend .traces").count() == 4
            legend = page.locator("#forest-legend").inner_text()
            assert "? (an open circle) not a measurement" in legend
            assert page.locator("#bound-legend").inner_text().startswith("Before a ratio: ≥")
            verdicts = page.locator("td.verdict").evaluate_all(
                "els => els.map(e => [e.dataset.verdict, e.dataset.reason])")
            assert [v for v, _ in verdicts] == [*(v for v, _, _ in EXPECTED.values()), "better"]
            assert "demonstration: the run was verified" in page.locator(
                "#finding-shown").inner_text()
            assert "1 demonstration (1 shown)" in page.locator("#summary").inner_text()
            assert links_resolve(page, page_file) == []
            assert page.locator("a.cite").count() == 2 + len(report.rows)
            cjk = page.locator("#finding-busy-beyond span[lang=zh]")
            assert cjk.inner_text() == CJK_SECTION
            assert cjk.evaluate(GLYPHS_DIFFER), "the Chinese section is drawn as boxes"
            page.screenshot(path=str(ARTIFACTS / "study-report.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert requests == [page_file.as_uri()]           # offline: nothing else
    for mark, _, _ in BOUND_MARKS:
        assert mark in legend


def test_the_summary_counts_size_with_direction_and_demonstrations_apart(report):
    """A finding that holds by construction is not among those that could have failed;
    "holds" is split by size (2.0 then, about 1.8 now: weaker); today's medians are set
    beside the study's figures."""
    assert [r.finding.id for r in report.demonstrations()] == ["shown"]
    assert "shown" not in [r.finding.id for r in report.tested()]
    assert report.held()["holds"] == 4
    # busy-beyond: 0.05 against 0.1 then, busy-within 1.3 against 1.2; alike: no ratio then
    assert report.sized("holds") == {"stronger now": 2, "weaker now": 1, "no size": 1}
    text = counts_text(report)
    assert "1 demonstration (1 shown)" in text and "weaker now" in text
    doc = study_document(report)
    assert doc["counts"]["demonstrations"] == 1 and doc["counts"]["measured"] == 6
    faster = next(f for f in doc["findings"] if f["id"] == "faster")
    assert faster["size"] == "weaker-now"
    assert faster["now"]["median_b"] == pytest.approx(1810.0)
    assert (faster["now"]["best_a"], faster["now"]["best_b"]) == (1020.0, 1850.0)
    out = Console(record=True, width=400)
    print_study(report, out)
    assert "best of 4 runs, as the studies took it: A 1020, B 1850 (1.81×)" in out.export_text()
