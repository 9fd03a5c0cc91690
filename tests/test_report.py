"""Reports from a fixed database: text and CSV snapshots, the HTML page opened in headless
Chromium (no request but the page itself, no console error, every Plotly chart drawn
with its ticks, a legend entry that toggles its trace, hover values, a screenshot kept),
generator-bound runs flagged, and the headline's verdict."""

from pathlib import Path

import pytest
from rich.console import Console

from stacklab.analysis.analyze import load_view
from stacklab.report.export import export_csv
from stacklab.report.html import Checks, plotly_js, write_html
from stacklab.report.text import print_summary
from stacklab.analysis.flags import flag_names
from stacklab.store import Store
from stacklab.store.records import Resources
from stacklab.measure.verify import Status, Verdict

from fakes import fake_experiment, fake_load, load_report
from test_report_charts import knob_experiment
from helpers import ROOT, assert_golden, launch_chromium, watched_page

ARTIFACTS = ROOT / "tests" / "artifacts"
CHART_NAMES = ("throughput", "latency", "spectrum", "persecond", "transfer", "cpu", "memory")


@pytest.fixture
def view(tmp_path):
    fake_experiment(tmp_path / "r.db")
    store = Store.open(tmp_path / "r.db")
    yield load_view(store, "fixed")
    store.close()


def test_text_summary_snapshot(view):
    console = Console(width=132, record=True, color_system=None)
    print_summary(view, console)
    assert_golden("report-summary.txt", console.export_text())


def test_csv_export_snapshot(view):
    assert_golden("report-export.csv", export_csv(view))


def test_statistics_of_the_fixed_runs(view):
    nginx16 = next(s for s in view.summaries if s.stack == "nginx" and s.concurrency == 16)
    assert nginx16.rps.median == pytest.approx(23200.0)
    lo, hi = nginx16.rps.ci
    assert lo <= 23200 <= hi
    # one value per completed request: 3 runs of 2 s at 22,968, 23,200 and 23,432 req/s
    assert nginx16.latency_us["count"] == 139_200
    assert nginx16.cpu_us_per_request["nginx"].median == pytest.approx(
        2.0 * 23200 * 2e-5 / (23200 * 2) * 1e6)


def test_generator_bound_runs_are_flagged_everywhere(view, tmp_path):
    flagged = [s for s in view.summaries if s.flagged]
    assert [(s.stack, s.concurrency) for s in flagged] == [("apache", 16)]
    console = Console(width=120, record=True, color_system=None)
    print_summary(view, console)
    assert "generator-bound" in console.export_text()
    html = write_html(view, tmp_path / "r.html").read_text()
    assert "generator-bound" in html


@pytest.mark.parametrize("cpu_s, threads, flagged", [(1.9, 1, True), (1.0, 1, False),
                                                      (3.7, 2, True), (2.0, 2, False)])
def test_run_flags_generator_bound(cpu_s, threads, flagged):
    load = fake_load(1000, 500, seed=1, duration_s=2.0, engine_cpu_s=cpu_s, threads=threads)
    assert ("generator-bound" in flag_names(load_report(load), Resources())) == flagged


def test_open_loop_rate_not_kept_is_flagged():
    load = fake_load(700, 500, seed=1)
    load["config"]["rate"] = 1000
    assert "rate-not-kept" in flag_names(load_report(load), Resources())
    load["config"]["rate"] = 720
    assert "rate-not-kept" not in flag_names(load_report(load), Resources())


def headline_of(view, path):
    html = write_html(view, path).read_text()
    return html[html.index('id="headline"'):html.index("</div>")]


def test_three_repetitions_name_a_clear_winner_with_its_interval(view, tmp_path):
    headline = headline_of(view, tmp_path / "r.html")
    # the fakes' runs step alike in both trials: paired round by round, exactly 2×
    assert ("nginx static-page wins: 2.00× the req/s of apache static-page, "
            "95% CI 2.00–2.00×, p &lt; 0.001") in headline
    assert "paired round by round" in headline                # the rule, named


def test_a_difference_within_the_noise_is_said_plainly(tmp_path):
    # nginx 0.5% faster, each trial's runs stepping their own way (±1%, ±2%)
    fake_experiment(tmp_path / "close.db", speed={"nginx": 10050.0, "apache": 10000.0},
                    rps_of={"ng0000000001": [10150.5, 9949.5, 10452.0],
                            "ap0000000001": [10100.0, 10200.0, 9800.0],
                            "ng0000000016": [11775.0, 11658.0, 11892.0],
                            "ap0000000016": [11600.0, 11832.0, 11368.0]})
    store = Store.open(tmp_path / "close.db")
    headline = headline_of(load_view(store, "fixed"), tmp_path / "r.html")
    store.close()
    assert "wins" not in headline and "not distinguishable" in headline
    assert "no verdict: " in headline and "reaches past ±5%" in headline
    assert "repetitions = " in headline


def test_plotly_js_is_inlined_once_and_nothing_is_fetched(view, tmp_path):
    html = write_html(view, tmp_path / "r.html").read_text()
    assert html.count("* plotly.js") == 1                  # the bundle's banner, once
    assert html.count(plotly_js()) == 1
    assert html.count('<script type="application/json" class="figure">') == len(CHART_NAMES)
    ours = html.replace(plotly_js(), "")
    assert "<script src" not in ours and "http" not in ours.split("<body>")[0]
    assert "mathjax" not in ours.lower()


def test_a_report_of_16_runs_inlines_plotlys_basic_bundle_and_weighs_under_1_5_mb(tmp_path):
    """Issue 41: the full bundle made a 15-run report about 5 MB. `make test`'s install
    fetched the basic bundle (scripts/fetch-plotly-basic.py): every trace the reports
    draw is a scatter, which it holds (the browser tests draw every chart with it)."""
    fake_experiment(tmp_path / "r.db", reps=4)
    store = Store.open(tmp_path / "r.db")
    try:
        html = write_html(load_view(store, "fixed"), tmp_path / "r.html").read_bytes()
    finally:
        store.close()
    assert b"* plotly.js (basic - minified) v" in html
    assert len(html) <= 1_500_000, len(html)


def assert_charts_drawn(page, workload: str) -> None:
    """Every chart of CHARTS drawn by Plotly, with tick labels on both axes."""
    for chart in CHART_NAMES:
        figure = f"#workload-{workload} .chart-{chart}"
        assert page.locator(f"{figure} .js-plotly-plot").count() == 1, chart
        assert page.locator(f"{figure} .main-svg").count() >= 1, chart
        assert page.locator(f"{figure} .xtick text").count() >= 2, chart
        assert page.locator(f"{figure} .ytick text").count() >= 2, chart


def assert_legend_toggles_and_hover_shows(page, workload: str) -> None:
    """A click on the throughput chart's first legend entry hides that trace (Plotly's
    'legendonly'), a second shows it again; hovering a mark shows its value."""
    figure = f"#workload-{workload} .chart-throughput"
    visible = f"""() => document.querySelector("{figure} .js-plotly-plot").data
                        .map(t => t.visible === undefined ? true : t.visible)"""
    before = page.evaluate(visible)
    assert "legendonly" not in before
    hidden = f"() => ({visible})().includes('legendonly')"
    page.locator(f"{figure} .legend .traces").first.click()
    # Plotly acts on a legend click once its double-click wait (300 ms) is over: wait for
    # the trace to hide, as long as a busy renderer needs
    page.wait_for_function(hidden, timeout=5000)
    page.locator(f"{figure} .legend .traces").first.click()
    page.wait_for_function(f"() => !({hidden})()", timeout=5000)
    assert page.evaluate(visible) == before
    page.locator(f"{figure} .scatterlayer .points path").first.hover(force=True)
    hover = page.locator(f"{figure} .hoverlayer .hovertext")
    hover.first.wait_for(timeout=3000)
    assert "req/s" in hover.first.text_content()


def test_html_opens_in_headless_chromium_with_every_chart(view, tmp_path):
    """`make test` installs Playwright and Debian's Chromium: without them this fails,
    saying what is missing, rather than skipping. Two pages: the stacks against
    concurrency, and a knob axis at one concurrency (its charts drawn by variant). The
    page asks for nothing but itself: no CDN, no font, no MathJax."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        pytest.fail(f"Playwright is missing ({e}): `make test` installs it into .venv")
    page_file = write_html(view, tmp_path / "report.html")
    knob_experiment(tmp_path / "knobs.db")
    store = Store.open(tmp_path / "knobs.db")
    knobs_file = write_html(load_view(store, "knobs"), tmp_path / "knobs.html")
    store.close()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page, errors, requests = watched_page(browser)
            page.goto(page_file.as_uri())
            assert_charts_drawn(page, "static-page")
            assert_legend_toggles_and_hover_shows(page, "static-page")
            assert page.locator("#recommendations tr").count() >= 2
            assert page.locator("#best tr").count() == 1 + len(view.summaries)
            assert page.locator("#results tr").count() == 1 + len(view.summaries)
            assert page.locator("#verdicts td.pass").count() >= 1
            assert page.locator("#compression tr").count() == 1 + 2   # one per variant
            assert "37.5%" in page.locator("#compression").inner_text()
            assert page.locator("#outcomes-static-page tr").count() == 1 + len(view.summaries)
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
            page.goto(knobs_file.as_uri())
            assert_charts_drawn(page, "static-page")
            assert_legend_toggles_and_hover_shows(page, "static-page")
            # the per-second chart: 4 variants in its legend, 3 runs × (req/s, p99) each
            persecond = "#workload-static-page .chart-persecond"
            assert page.locator(f"{persecond} .legend .traces").count() == 4
            assert page.locator(f"{persecond} .scatterlayer .trace").count() == 4 * 3 * 2
            assert page.locator("#outcomes-static-page details").count() == 4
            page.screenshot(path=str(ARTIFACTS / "report-knobs.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert requests == [page_file.as_uri(), knobs_file.as_uri()]   # offline: nothing else


def test_the_results_table_comes_before_the_charts(view, tmp_path):
    html = write_html(view, tmp_path / "r.html").read_text()
    assert html.index('id="headline"') < html.index('<table id="results">') < html.index(
        '<figure class="chart-')


def test_verification_folds_saying_what_it_holds(view, tmp_path):
    html = write_html(view, tmp_path / "r.html").read_text()
    folded = html[html.index("<h2>Verification</h2>"):html.index("<h2>Environment</h2>")]
    # the trials at the first concurrency (nginx and apache), two checks each
    assert '<details class="checks" id="verification"><summary class="pass">4 checks: all ' \
           'PASS</summary>' in folded
    assert folded.index("<details") < folded.index('<table id="verdicts">') < folded.index(
        "</details>")
    assert "<details open" not in html


@pytest.mark.parametrize("statuses, line, css", [
    ((Status.PASS,), "1 check: all PASS", "pass"),
    ((Status.PASS, Status.WARN, Status.PASS), "3 checks: 1 WARN", "warn"),
    ((Status.FAIL, Status.WARN, Status.FAIL), "3 checks: 1 WARN, 2 FAIL", "fail"),
    ((), "no checks stored", "pass")])
def test_a_folded_table_says_its_warnings_and_failures(statuses, line, css):
    checks = Checks(tuple(Verdict("nginx", f"check {i}", s, "") for i, s in enumerate(statuses)))
    assert (checks.line, checks.css) == (line, css)
