"""`show` and `compare` fit the terminal they print on: at 80, 100 and 120 columns no line
is wider than the terminal, every trial's name is printed whole (wrapped between words,
never replaced by its id), no cell is cut with "…" so that a figure loses digits, and a
flag's words are said once per trial (a numbered note), not once per metric row.

The trials are tests/fakes.py's, given long names (knobs with long values) and the flags
that make the most prose: limited by the load engine, starved, a busy host."""

import io
import re
from dataclasses import replace

import pytest
from rich.cells import cell_len
from rich.console import Console

from stacklab.analysis.analyze import load_view, same_definition_pairs
from stacklab.commands import results
from stacklab.env import Environment
from stacklab.analysis.flags import BOUNDING
from stacklab.report import common_knobs, series_name
from stacklab.report.baseline import compare_to_baseline, table
from stacklab.report.fmt import number
from stacklab.report.text import experiments_table, print_summary, trials_table
from stacklab.store import Store

from fakes import fake_experiment

WIDTHS = (80, 100, 120)
LIMITED = BOUNDING["generator-bound"]            # the words a generator-bound flag earns
# knobs every fake trial gets, so that a name is long and has long words
LONG = {"php.opcache.validate_timestamps": False,
        "nginx.open_file_cache": "max=10000 inactive=20s"}
BUSY = ("host-busy", "2 of 5 runs; run 3: 1.42 cores of other work beside 2 lab cores")


def lengthened(view, busy: bool):
    """`view` with each trial's name long (its own knob value too, so names differ), and
    with `busy`, nginx c=1 on a busy host (a run set aside) and apache c=1 starved."""
    out = []
    for s in view.summaries:
        knobs = {**s.knobs, **LONG, "nginx.worker_connections": 512 * s.concurrency}
        s = replace(s, knobs=knobs, label=f"{s.stack} {s.workload} c={s.concurrency} "
                    + " ".join(f"{k}={v}" for k, v in sorted(knobs.items())))
        if busy and (s.stack, s.concurrency) == ("nginx", 1):
            s = replace(s, flag_details=(*s.flag_details, BUSY), disturbance=1.7,
                        busy_ratio=0.62, runs_set_aside=1)
        if busy and (s.stack, s.concurrency) == ("apache", 1):
            s = replace(s, flagged=("starved",),
                        flag_details=(("starved", "1 of 5 runs: 3 of 16 slots idle"),))
        out.append(s)
    return replace(view, summaries=out)


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    db = tmp_path_factory.mktemp("width") / "r.db"
    fake_experiment(db, "fixed", reps=5)             # apache c=16 generator-bound once
    fake_experiment(db, "faster", speed={"nginx": 30000.0, "apache": 10000.0}, reps=5)
    store = Store.open(db)
    try:
        a, b = load_view(store, "fixed"), load_view(store, "faster")
    finally:
        store.close()
    return db, lengthened(a, busy=True), lengthened(b, busy=False)


def rendered(width: int, *renderables, fn=None) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    if fn:
        fn(console)
    for r in renderables:
        console.print(r)
    return console.export_text()


def check_fits(text: str, width: int) -> None:
    for line in text.splitlines():
        assert cell_len(line) <= width, f"wider than {width}: {line!r}"
        # a cell cut by Rich ends with "…" (a range "-2%…+2%" has a figure after it)
        assert not re.search(r"…(\s|$)", line), f"a cell was cut: {line!r}"


def check_names(text: str, names) -> None:
    """Every word of every name is printed whole (wrapping moves words, never splits
    one); the names' own words make them distinct (their worker_connections value)."""
    words = set(text.split())
    for name in names:
        missing = [w for w in name.split() if w not in words]
        assert not missing, f"{name!r}: {missing} not printed whole"


def trial(view, stack, c):
    return next(s for s in view.summaries if (s.stack, s.concurrency) == (stack, c))


@pytest.mark.parametrize("width", WIDTHS)
def test_show_fits_with_every_name_figure_and_one_note_per_flagged_trial(views, width):
    _, view, _ = views
    text = rendered(width, fn=lambda console: print_summary(view, console))
    check_fits(text, width)
    common = common_knobs(view.summaries)
    check_names(text, [series_name(s, common) for s in view.summaries])
    for s in view.summaries:
        assert number(s.rps.median) in text, s.label          # every median, whole
        assert number(s.mbps.median, 1) in text, s.label
    flat = " ".join(text.split())
    # apache c=16's note, once (the headline may name the flag too: it is its answer)
    assert flat.count(f"(it {LIMITED}") == 1
    # what the busy host measurably did, not the worst case it could have
    assert flat.count(BUSY[1]) == 1 and "gave 62% of its others' req/s" in flat
    assert "slower" not in flat
    assert flat.count("3 of 16 slots idle") == 1
    assert flat.count("describe the clients that were served") == 1


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_of_two_trials_fits_and_says_a_flag_once(views, width):
    _, view, _ = views
    a, b = trial(view, "nginx", 16), trial(view, "apache", 16)     # B generator-bound
    text = rendered(width, trials_table(view, a, b))
    check_fits(text, width)
    check_names(text, [a.label, b.label])
    flat = " ".join(text.split())
    assert flat.count(LIMITED) == 1                    # not once per metric (6 of them)
    assert flat.count("generator-bound") == 6 + 1     # each metric's reason, the note
    assert "0.500" in text and "2.000" in text         # B/A of req/s and of p50, whole


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_of_two_experiments_fits_and_says_each_flag_once(views, width):
    _, a, b = views
    text = rendered(width, experiments_table(a, b))
    check_fits(text, width)
    common = common_knobs(a.summaries)
    check_names(text, [series_name(s, common) for s in a.summaries])
    flat = " ".join(text.split())
    # apache c=16 is generator-bound in both: one note per side, for its three metrics
    assert flat.count(LIMITED) == 2
    assert flat.count(BUSY[1]) == 1                    # A's nginx c=1 only
    for sa, sb in same_definition_pairs(a, b):
        assert number(sa.rps.median) in text and number(sb.rps.median) in text


@pytest.mark.parametrize("width", WIDTHS)
def test_the_baseline_table_fits_and_says_each_flag_once(views, width):
    _, base, new = views
    found = compare_to_baseline(new, base, same_definition_pairs(new, base), "r.db")
    text = rendered(width, table(found, new))
    check_fits(text, width)
    check_names(text, [s.label for s in new.summaries])
    assert " ".join(text.split()).count(LIMITED) == 2


@pytest.mark.parametrize("width", WIDTHS)
def test_the_commands_print_what_fits(views, width):
    """`show` and `compare` as the commands print them, on the stored (short) names."""
    db = views[0]
    for call in (lambda env: results.show(env, "fixed", db),
                 lambda env: results.compare(env, "fixed", "faster", db, None),
                 lambda env: results.compare(env, "ng0000000016", "ap0000000016", db,
                                             "fixed")):
        console = Console(width=width, record=True, color_system=None, file=io.StringIO())
        call(replace(Environment.default(), stdout=console,
                     stderr=Console(file=io.StringIO())))
        text = console.export_text()
        check_fits(text, width)
        assert "nginx static-page" in text and "apache static-page" in text
