"""One form for a ratio wherever it is written (show, compare, recommend, the report, the
headline, a study): about three significant digits, the thousands grouped, never an
exponent — "1,482×", not "1.48e+03×" nor "5876761.10×"; a change below 3× as a
percentage (issue 39)."""

import pytest

from stacklab.report import charts
from stacklab.report.fmt import change, multiple, ratio_ci, times
from stacklab.report.headline import headlines

from test_headline import label, stored


@pytest.mark.parametrize("ratio, table, said", [
    (0.0072, "0.0072×", "0.0072×"),
    (1.7e-7, "0.00000017×", "0.00000017×"),
    (0.5, "0.50×", "0.5×"),
    (1.52, "1.52×", "1.52×"),
    (34.91, "34.9×", "34.9×"),
    (349.4, "349×", "349×"),
    (1482.3, "1,482×", "1,482×"),
    (5876761.1, "5,876,761×", "5,876,761×"),
])
def test_a_ratio_has_one_form_without_an_exponent(ratio, table, said):
    assert times(ratio) == table and multiple(ratio) == said


def test_a_change_is_a_percentage_below_3x_and_a_grouped_multiple_above():
    assert [change(r - 1) for r in (1.2, 0.06, 2.99, 3.0, 1482.3, 5876761.1)] == [
        "+20.0%", "-94.0%", "+199.0%", "3×", "1,482×", "5,876,761×"]


def test_an_interval_and_a_table_cell_of_a_large_ratio_are_grouped():
    assert ratio_ci((1420.4, 1530.6)) == "1,420–1,531×"
    assert times(5876761.1, 3, "") == "5,876,761"


def test_the_headline_says_a_large_ratio_grouped(tmp_path):
    view = stored(tmp_path / "r.db", [("nginx", {}, 14_820_000.0, {}),
                                      ("apache", {}, 1_000.0, {}),
                                      ("nginx", {"nginx.sendfile": False}, 10.0, {})])
    [h] = headlines(view)
    first, second = h.sentence(label).split("; ")
    assert first.startswith("nginx {} wins: 14,820× the req/s of apache {}, 95% CI 14,")
    assert "e+0" not in second and "-100.0% req/s" in second
    view = stored(tmp_path / "s.db", [("nginx", {"nginx.sendfile": True}, 10.0, {}),
                                      ("nginx", {"nginx.sendfile": False}, 14_820.0, {})])
    [h] = headlines(view)
    assert h.sentence(label).startswith("nginx.sendfile = False: 1,482× req/s vs the default")


def test_a_ratio_axis_is_labelled_without_an_exponent():
    assert [multiple(t) for t in charts.ms_ticks(1.0, 1e6)][-2:] == ["500,000×", "1,000,000×"]
