"""Finding what `compare` and `export-config` are given, in-process on the fixed results of
tests/fakes.py: a trial id (or a unique prefix) in any experiment of the database, an
ambiguous prefix refused naming the trials and experiments it fits, `compare NAME NAME`
as the newest run of NAME against the one before it (never against itself), and an
argument that names nothing said as such."""

import json

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.errors import ExitStatus
from stacklab.store import Store

from fakes import fake_experiment


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def said(result) -> str:
    """The error line, its wrapping undone."""
    return " ".join(result.stderr.split())


def other_experiment(db, name: str, trial_ids: tuple[str, ...]) -> int:
    """An experiment with trials of these ids and no runs (what `run` stores first)."""
    store = Store.open(db)
    try:
        return store.new_experiment(
            name, f"{name}.toml", "h", {"experiment": {"description": ""}},
            [(t, f"label of {t}", {"stack": "nginx", "workload": "static-page",
                                   "concurrency": 1, "knobs": {}}) for t in trial_ids],
            {}, "0", None, "2026-01-02T00:00:00.000+00:00")
    finally:
        store.close()


@pytest.fixture
def db(tmp_path):
    """`fixed` (experiment 1: ng/ap trials at c = 1 and 16), then `other` (experiment 2)
    holding a trial whose id starts as nginx's do."""
    path = tmp_path / "r.db"
    fake_experiment(path, "fixed")
    other_experiment(path, "other", ("ng0000000002",))
    return path


def compared(*args) -> dict:
    """`compare ARGS --json`: which experiments and trials it compared, and its rows."""
    result = invoke("compare", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def rps_ratios(doc: dict) -> dict[str, float]:
    return {r["trial_id"]: r["ratio"] for r in doc["rows"] if r["metric"] == "rps"}


def test_trials_are_found_in_an_experiment_that_is_not_the_newest(db):
    doc = compared("ng0000000016", "ap0000000016", "--db", db)
    assert doc["a"] == {"experiment_id": 1, "experiment": "fixed",
                        "trial_id": "ng0000000016", "label": "nginx static-page c=16"}
    assert (doc["b"]["experiment_id"], doc["b"]["trial_id"]) == (1, "ap0000000016")
    # a unique prefix is enough; one that fits two trials is not
    short = compared("ng000000001", "ap0000000001", "--db", db)
    assert (short["a"]["trial_id"], short["b"]["trial_id"]) == ("ng0000000016",
                                                                "ap0000000001")
    assert invoke("compare", "ng000000001", "ap00", "--db", db).exit_code == 2


def test_an_ambiguous_prefix_names_each_trial_and_its_experiment(db):
    result = invoke("compare", "ng000000000", "ap0000000016", "--db", db)
    assert result.exit_code == ExitStatus.BAD_INPUT, result.output
    line = said(result)
    assert line.startswith("stacklab: error: A 'ng000000000': more than one trial's id")
    assert "ng0000000001 (nginx static-page c=1, experiment 1 'fixed')" in line
    assert "ng0000000002 (label of ng0000000002, experiment 2 'other')" in line


def test_trials_no_one_experiment_holds_are_refused_naming_where_each_is(db):
    result = invoke("compare", "ng0000000002", "ap0000000016", "--db", db)
    assert result.exit_code == ExitStatus.BAD_INPUT, result.output
    line = said(result)
    assert "no experiment holds both trials" in line
    assert "A ng0000000002 is in experiment 2 ('other')" in line
    assert "B ap0000000016 in experiment 1 ('fixed')" in line


def test_trials_in_several_experiments_are_the_newest_holding_both(tmp_path):
    db = tmp_path / "r.db"
    fake_experiment(db, "fixed")
    fake_experiment(db, "again", speed={"nginx": 40000.0, "apache": 10000.0})
    other_experiment(db, "other", ("zz0000000001",))
    result = invoke("compare", "ng0000000001", "ap0000000001", "--db", db)
    assert result.exit_code == 0, result.output
    assert "the trials of experiment 2 ('again'), the newest of the 2 holding both" in said(
        result)
    doc = compared("ng0000000001", "ap0000000001", "--db", db)
    assert doc["a"]["experiment_id"] == doc["b"]["experiment_id"] == 2
    assert rps_ratios(doc)["ng0000000001"] == pytest.approx(0.25)   # 10,100 / 40,400
    # --experiment still names one
    named = compared("ng0000000001", "ap0000000001", "-e", "fixed", "--db", db)
    assert named["a"]["experiment_id"] == 1
    assert rps_ratios(named)["ng0000000001"] == pytest.approx(0.5)


def test_the_same_trial_twice_is_refused(db):
    result = invoke("compare", "ng0000000016", "ng00000000", "-e", "fixed", "--db", db)
    assert result.exit_code == ExitStatus.BAD_INPUT       # ng00000000: two trials of fixed
    result = invoke("compare", "ng0000000016", "ng0000000016", "--db", db)
    assert result.exit_code == ExitStatus.BAD_INPUT
    assert "the same trial" in said(result) and "never compared with itself" in said(result)


def test_compare_name_name_is_the_newest_run_against_the_one_before(tmp_path):
    db = tmp_path / "r.db"
    fake_experiment(db, "quick")
    fake_experiment(db, "other")
    fake_experiment(db, "quick", speed={"nginx": 30000.0, "apache": 10000.0})
    doc = compared("quick", "quick", "--db", db)
    assert doc["a"] == {"experiment_id": 1, "experiment": "quick"}
    assert doc["b"] == {"experiment_id": 3, "experiment": "quick"}
    ratios = rps_ratios(doc)
    assert ratios["ng0000000001"] == pytest.approx(1.5)
    assert ratios["ap0000000001"] == pytest.approx(1.0)


def test_compare_name_name_with_one_run_of_that_name_is_refused(db):
    result = invoke("compare", "fixed", "fixed", "--db", db)
    assert result.exit_code == ExitStatus.BAD_INPUT, result.output
    line = said(result)
    assert "holds only one (id 1)" in line and "never compared with itself" in line
    same = invoke("compare", "1", "fixed", "--db", db)
    assert same.exit_code == ExitStatus.BAD_INPUT
    assert "both experiment 1" in said(same)


@pytest.mark.parametrize("a, b, side, words", [
    ("1", "999", "B '999'", "no experiment 999 and no trial whose id starts with '999'"),
    ("999", "1", "A '999'", "no experiment 999 and no trial whose id starts with '999'"),
    ("nope", "fixed", "A 'nope'", "no experiment named 'nope' and no trial whose id starts"),
])
def test_an_argument_that_names_nothing_is_said_as_such(db, a, b, side, words):
    result = invoke("compare", a, b, "--db", db)
    assert result.exit_code == ExitStatus.BAD_INPUT, result.output
    line = said(result)
    assert line.startswith(f"stacklab: error: {side}: {words}"), line
    assert f"in {db};" in line


def test_an_experiment_against_a_trial_is_refused(db):
    result = invoke("compare", "1", "ap0000000016", "--db", db)
    assert result.exit_code == ExitStatus.BAD_INPUT, result.output
    assert ("A '1' is experiment 1 ('fixed') and B 'ap0000000016' is a trial"
            in said(result))


def test_export_config_finds_a_trial_in_any_experiment(db, tmp_path):
    out = tmp_path / "exported"
    result = invoke("export-config", "ap0000000016", "-o", out, "--db", db)
    assert result.exit_code == 0, result.output
    assert "trial ap0000000016" in (out / "README.txt").read_text()
    ambiguous = invoke("export-config", "ng000000000", "-o", out, "--db", db)
    assert ambiguous.exit_code == ExitStatus.BAD_INPUT
    assert "experiment 2 'other'" in said(ambiguous)
