"""The commands without a stack of their own, run in-process (typer's CliRunner) on the
fixed results of tests/fakes.py: doctor, stacks, workloads, compare, recommend and
export-config. Assertions are on facts (ids, knob names, figures, exit codes), not on
wording that is meant to evolve."""

import re

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.stacks import COMPONENTS, GROUPS, REGISTRY, STACKS
from stacklab.store import Outcome, RunRecord, Store
from stacklab.workloads import WORKLOADS

from fakes import VERDICTS, fake_experiment, fake_report, fake_resources
from helpers import require_engine


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# the lab's inventory -----------------------------------------------------------------

def test_doctor_names_every_component_with_its_installed_version():
    require_engine()
    result = invoke("doctor")
    assert result.exit_code == 0, result.output
    for name, comp in COMPONENTS.items():
        row = next(line for line in result.output.splitlines() if f"│ {name} " in line)
        assert "found" in row and comp.version() in row, row
    assert "stacklab-load" in result.output
    assert "the default experiment can run" in result.output


def test_doctor_names_the_package_of_a_missing_default_component(monkeypatch):
    require_engine()
    monkeypatch.setattr(type(COMPONENTS["nginx"]), "binary", "/nonexistent/nginx")
    result = invoke("doctor")
    assert result.exit_code == 1
    row = next(line for line in result.output.splitlines() if "│ nginx " in line)
    assert "missing" in row and "apt-get install nginx" in row
    assert "cannot run" in result.output


def test_doctor_names_each_real_applications_package_and_whose_workloads_need_it(
        monkeypatch):
    require_engine()
    from stacklab import inventory
    versions = {"mediawiki": None}      # as if MediaWiki's package were not installed
    real = inventory.debian_version
    monkeypatch.setattr(inventory, "debian_version",
                        lambda p: versions[p] if p in versions else real(p))
    result = invoke("doctor")
    assert result.exit_code == 0, result.output     # the default experiment needs none
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines()
            if line.startswith("│")}
    wordpress = rows["wordpress (WordPress's workloads)"]
    assert "found" in wordpress and real("wordpress") in wordpress
    assert "missing" in rows["mediawiki (MediaWiki's workloads)"]
    assert "apt-get install mediawiki" in rows["mediawiki (MediaWiki's workloads)"]


def test_stacks_lists_every_stack_and_every_knob_in_full():
    result = invoke("stacks")
    assert result.exit_code == 0, result.output
    for stack in STACKS.values():
        assert f"│ {stack.name} " in result.output
        assert " → ".join(stack.components) in result.output
    keys = [k.key for owner in ["load", *GROUPS, *COMPONENTS]
            for k in REGISTRY.for_component(owner)]
    cut = [k for k in keys if k not in result.output]
    assert not cut, f"knob names not shown in full: {cut}"
    gzip = next(line for line in result.output.splitlines() if "│ nginx.gzip " in line)
    assert "bool" in gzip and "False" in gzip and "S2" in gzip


def test_workloads_lists_each_with_what_it_needs():
    result = invoke("workloads")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    for w in WORKLOADS.values():
        assert w.name in rows, w.name
        assert (", ".join(w.needs) or "any server") in rows[w.name]
        assert f"│ {len(w.urls)} " in rows[w.name]


# on stored results -------------------------------------------------------------------

@pytest.fixture
def db(tmp_path):
    """Two experiments of the fixed figures: `fixed` and `faster` (nginx 1.5× as fast)."""
    path = tmp_path / "r.db"
    fake_experiment(path, "fixed", reps=5)
    fake_experiment(path, "faster", speed={"nginx": 30000.0, "apache": 10000.0}, reps=5)
    return path


def test_compare_two_trials_prints_both_medians_and_their_ratio(db):
    result = invoke("compare", "ng0000000016", "ap0000000016", "-e", "fixed", "--db", db)
    assert result.exit_code == 0, result.output
    assert "ng0000000016 nginx static-page c=16" in result.output
    assert "ap0000000016 apache static-page c=16" in result.output
    # A = nginx 23,432 req/s (median of 5), B = apache 11,716: B/A = 0.500
    row = next(line for line in result.output.splitlines() if line.startswith("req/s"))
    assert "23,432" in row and "11,716" in row and "0.500" in row, row


def test_compare_two_experiments_matches_trials_by_definition(db):
    result = invoke("compare", "fixed", "faster", "--db", db)
    assert result.exit_code == 0, result.output
    assert "faster" in result.output and "fixed" in result.output
    rps, last = {}, None        # a trial's id is printed under its name, beside p50
    for line in result.output.splitlines():
        last = line if " req/s " in line else last
        if line.split()[:1] and line.split()[0].startswith(("ng0", "ap0")):
            rps[line.split()[0]] = last
    assert set(rps) == {"ng0000000001", "ng0000000016", "ap0000000001", "ap0000000016"}
    # nginx c=1: 20,402 → 30,603 req/s (1.500×); apache unchanged (1.000×)
    assert "20,402" in rps["ng0000000001"] and "30,603" in rps["ng0000000001"]
    assert "1.500" in rps["ng0000000001"] and "1.000" in rps["ap0000000001"]


@pytest.mark.parametrize("before", [True, False])
def test_db_is_taken_before_or_after_the_command(db, before):
    args = ["--db", db, "list"] if before else ["list", "--db", db]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "fixed" in result.output and "faster" in result.output
    assert invoke("--db", db, "show", "fixed", "--db", db).exit_code == 0


@pytest.mark.parametrize("args, said", [
    (["--db", "a.db", "list", "--db", "b.db"], "--db given twice: a.db before the command, "
                                               "b.db after it"),
    (["--db", "a.db", "stacks"], "--db a.db: `stacklab stacks` reads no results database"),
])
def test_db_before_the_command_is_refused_where_it_would_be_ignored(args, said):
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.output.strip().startswith(f"stacklab: error: {said}")
    assert len(result.output.strip().splitlines()) == 1


def test_compare_names_an_unknown_trial(db):
    result = invoke("compare", "zz", "ng0000000016", "-e", "fixed", "--db", db)
    assert result.exit_code != 0
    assert "'zz'" in result.output and "fixed" in result.output


def knob_experiment(path):
    """nginx.sendfile on (the default) against off, 5 repetitions each: off is 1.5× as
    fast, so recommend has one knob effect to report."""
    store = Store.open(path)
    trials = []
    for sendfile in (False, True):
        d = {"stack": "nginx", "workload": "static-page", "concurrency": 16,
             "knobs": {"nginx.sendfile": sendfile}, "measure": {"duration_s": 2.0}}
        trials.append((f"sf{int(sendfile)}0000000016",
                       f"nginx static-page c=16 nginx.sendfile={sendfile}", d))
    exp = store.new_experiment("sendfile", "sendfile.toml", "h", {"experiment": {
        "description": "nginx.sendfile against its default"}}, trials,
                               {"cores": 2, "cpu_model": "Test CPU", "kernel": "6.1"},
                               "0.1.0", "abc123", "2026-01-01T00:00:00+00:00")
    for rep in range(1, 6):
        for tid, _, d in trials:
            rps = (20000.0 if d["knobs"]["nginx.sendfile"] else 30000.0) * (1 + (rep - 3) / 100)
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=tid, repetition=rep, outcome=Outcome.OK,
                started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:00:03",
                knobs={"nginx": {"sendfile": d["knobs"]["nginx.sendfile"]}},
                versions={"nginx": "1.22.1", "stacklab-load": "0.1.0"},
                configs={"nginx/nginx.conf": "sendfile on;\nlisten 127.0.0.1:41234;\n"
                         "root /tmp/stacklab-0/s-1234-abcdef12/docroot-static-page;\n"},
                verdicts=VERDICTS, load=fake_report(rps, 700.0, seed=rep),
                resources=fake_resources("nginx", 0.4, 12.0), run_dir="/tmp/x"))
    store.close()


def test_recommend_ranks_the_knob_against_its_default(tmp_path):
    knob_experiment(tmp_path / "k.db")
    result = invoke("recommend", "sendfile", "--db", tmp_path / "k.db")
    assert result.exit_code == 0, result.output
    effect = result.output.split("nginx.sendfile =", 1)[1].split("└")[0]   # its table row
    assert "True" in effect and "False" in effect      # the value and its default
    assert re.search(r"\+50(\.0)?%", effect), effect    # 30,000 against 20,000 req/s
    assert "nginx / static-page" in effect
    assert "30,000" in result.output                   # the best combination's req/s


def test_export_config_writes_the_trials_files_cleaned_of_lab_paths(tmp_path):
    knob_experiment(tmp_path / "k.db")
    out = tmp_path / "exported"
    result = invoke("export-config", "sf1", "-o", out, "--db", tmp_path / "k.db")
    assert result.exit_code == 0, result.output
    conf = out / "nginx" / "nginx.conf"
    assert str(conf) in result.output.replace("\n", "")
    assert conf.read_text() == ("sendfile on;\nlisten 127.0.0.1:PORT;\n"
                                "root /var/www/html;\n")
    readme = (out / "README.txt").read_text()
    assert "trial sf10000000016, repetition 5" in readme
    assert '"sendfile": true' in readme and '"nginx": "1.22.1"' in readme


def test_export_config_names_an_ambiguous_trial(tmp_path):
    knob_experiment(tmp_path / "k.db")
    result = invoke("export-config", "sf", "-o", tmp_path / "x", "--db", tmp_path / "k.db")
    assert result.exit_code != 0
    assert "'sf'" in result.output and "more than one" in result.output


@pytest.mark.parametrize("where, fragment", [
    ("missing/report.html", "no directory {parent} to write it in"),
    (".", "is a directory"),
])
def test_report_into_a_missing_directory_is_an_error_naming_it(db, tmp_path, where,
                                                                fragment):
    out = tmp_path / where
    result = invoke("report", "fixed", "--db", db, "-o", out)
    assert result.exit_code == 2, result.output
    line = " ".join(result.stderr.split())
    assert line.startswith(f"stacklab: error: -o {out}: "), line
    assert fragment.format(parent=out.parent) in line
    assert not (tmp_path / "missing").exists()          # nothing made on the way
