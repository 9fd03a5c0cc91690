"""The HTML report against a baseline, as headless Chromium draws it (issue 20): the
results table before the first chart, verification folded, no verdict never green, a log
axis where a chart spans more than a decade, a distorted percentile hollow and dashed
and named so, the baseline in the headline and on the charts, and each run's per-second
rate without the drop to zero its last, partial second used to draw.

The experiments are fakes (test_report_charts.knob_experiment): four variants from 1,000
to 64,000 req/s; the baseline's variant with 2 workers was held back by the load engine
(so its comparison has no verdict), the new one's with 1 worker starved some clients (its
percentiles are distorted) and the one with 4 workers is 1.5× faster. Every run lasted
0.3 s past its last whole second, as in-flight requests make a real run do."""

from pathlib import Path

import pytest

from stacklab.analysis.analyze import load_view
from stacklab.commands.results import same_definition_pairs
from stacklab.report.baseline import compare_to_baseline
from stacklab.report.html import write_html
from stacklab.store import Store

from helpers import launch_chromium, watched_page
from test_report import ARTIFACTS, assert_charts_drawn
from test_report_charts import knob_experiment

SPEEDS = [1000.0, 4000.0, 16000.0, 64000.0]
NEW_SPEEDS = [1000.0, 4000.0, 24000.0, 64000.0]     # worker_processes=4: 1.5×
TAIL_S = 0.3


@pytest.fixture
def report(tmp_path) -> Path:
    db = tmp_path / "r.db"
    knob_experiment(db, name="base", speeds=SPEEDS, flags={"wp2": ["generator-bound"]},
                    tail_s=TAIL_S)
    knob_experiment(db, name="new", speeds=NEW_SPEEDS, flags={"wp1": ["starved"]},
                    tail_s=TAIL_S)
    store = Store.open(db)
    base, new = load_view(store, "base"), load_view(store, "new")
    store.close()
    found = compare_to_baseline(new, base, same_definition_pairs(new, base), str(db))
    return write_html(new, tmp_path / "report.html", found)


def plot(figure: str) -> str:
    """JavaScript for the Plotly graph div of a figure (its CSS selector)."""
    return f'document.querySelector("{figure} .js-plotly-plot")'


def is_green(rgb: str) -> bool:
    """"rgb(44, 160, 44)" → True: green dominates."""
    r, g, b = (int(float(v)) for v in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
    return g > r + 30 and g > b + 30


def assert_order_and_folds(page) -> None:
    """The results table above the first chart (in the document and on screen), and the
    verification tables closed, with their summary saying what they hold."""
    before = page.evaluate("""() => {
        const table = document.querySelector("#results");
        const chart = document.querySelector("figure[class^='chart-'] .js-plotly-plot");
        return [Boolean(table.compareDocumentPosition(chart)
                        & Node.DOCUMENT_POSITION_FOLLOWING),
                table.getBoundingClientRect().bottom <= chart.getBoundingClientRect().top];
    }""")
    assert before == [True, True]
    assert page.evaluate('() => document.querySelector("#verification").open') is False
    assert not page.locator("#verdicts").is_visible()
    assert page.locator("#verification > summary").inner_text() == "9 checks: 1 WARN"
    rows = page.locator("#outcomes-static-page details")
    assert rows.count() == 4 and not any(rows.nth(i).evaluate("d => d.open")
                                         for i in range(4))
    page.locator("#verification > summary").click()
    assert page.locator("#verdicts").is_visible()       # it opens


def assert_no_verdict_is_not_green(page) -> None:
    """The table's no-verdict cells and the baseline chart's no-verdict marks, as drawn."""
    cells = page.locator("#baseline-rows td.v-no-verdict")
    assert cells.count() >= 1
    for i in range(cells.count()):
        assert cells.nth(i).inner_text().startswith("no verdict")
        assert not is_green(cells.nth(i).evaluate("e => getComputedStyle(e).color"))
    better = page.locator("#baseline-rows td.v-better").first
    assert is_green(better.evaluate("e => getComputedStyle(e).color"))   # the test can tell
    colours = page.evaluate(f"""() => {{
        const gd = {plot(".chart-baseline")};
        const traces = gd.querySelectorAll(".scatterlayer .trace");
        return gd.data.map((t, i) => [t.name, Array.from(
            traces[i].querySelectorAll(".points path"),
            p => getComputedStyle(p).stroke + "|" + getComputedStyle(p).fill)]);
    }}""")
    drawn = {name: paints for name, paints in colours if paints}
    assert "req/s: no verdict" in drawn and "req/s: better" in drawn
    for name, paints in drawn.items():
        greens = [is_green(c) for p in paints for c in p.split("|") if c.startswith("rgb")]
        assert any(greens) == name.endswith(": better"), (name, paints)


def assert_log_axis_and_legends(page) -> None:
    """Throughput spans 64× : a log axis with 1-2-5 labels; memory does not: linear. The
    distorted percentiles and the baseline say so in their legends."""
    figure = "#workload-static-page .chart-throughput"
    assert page.evaluate(f"() => {plot(figure)}._fullLayout.yaxis.type") == "log"
    ticks = page.locator(f"{figure} .ytick text").all_text_contents()
    assert "1,000" in ticks and "10,000" in ticks, ticks
    memory = "#workload-static-page .chart-memory"
    assert page.evaluate(f"() => {plot(memory)}._fullLayout.yaxis.type") == "linear"
    legend = page.locator(f"{figure} .legendtext").all_text_contents()
    assert "baseline base" in legend, legend
    latency = page.locator("#workload-static-page .chart-latency .legendtext").all_text_contents()
    assert any("distorted (starved)" in t for t in latency), latency
    hollow = page.evaluate(f"""() => {plot("#workload-static-page .chart-latency")}.data
        .filter(t => t.name.includes("distorted") && t.marker)
        .map(t => t.marker.symbol + t.mode)""")
    assert "circle-openmarkers" in hollow


def assert_per_second_ends_at_its_rate(page) -> None:
    """Every run's last second is drawn at its rate (0.3 s of requests over 0.3 s), not
    as a fall to 30% of it."""
    runs = page.evaluate(f"""() => {plot("#workload-static-page .chart-persecond")}.data
        .filter(t => t.yaxis === "y").map(t => t.y)""")
    assert len(runs) == 4 * 3
    for y in runs:
        assert len(y) == 3                          # seconds 0, 1 and the 0.3 s after
        assert y[-1] > 0.8 * min(y[:-1]), y


def test_the_report_against_a_baseline_in_chromium(report):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        pytest.fail(f"Playwright is missing ({e}): `make test` installs it into .venv")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page, errors, requests = watched_page(browser)
            page.goto(report.as_uri())
            assert_charts_drawn(page, "static-page")
            first = page.locator("#headline > p").first.inner_text()
            assert first.startswith("Against baseline base (experiment 1): req/s "), first
            assert_order_and_folds(page)
            assert_no_verdict_is_not_green(page)
            assert_log_axis_and_legends(page)
            assert_per_second_ends_at_its_rate(page)
            page.screenshot(path=str(ARTIFACTS / "report-baseline.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert requests == [report.as_uri()]
