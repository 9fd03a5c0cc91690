"""`--json` of show, compare, recommend, doctor and workloads, and shell completion.

Each command runs in-process (cli.main with an Environment of its own) on the fixed
results of tests/fakes.py; its document is checked against its schema in
stacklab/report/schemas/ and its figures against what analyze, stats and gate compute
(and what the text tables print). Each schema is also shown to refuse a document that
lacks a required field, so that passing it means something."""

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from stacklab.analysis.analyze import REASONS, VERDICTS, compare_trials, load_view
from stacklab.cli import main
from stacklab.env import Environment
from stacklab.errors import ExitStatus
from stacklab.analysis.gate import judge
from stacklab.experiment.gate import parse_threshold
from stacklab.inventory import Feature, Tool
from stacklab.analysis.recommend import effects
from stacklab.stacks import COMPONENTS, REGISTRY, STACKS
from stacklab.store import Outcome, RunRecord, Store
from stacklab.workloads import WORKLOADS

from fakes import fake_experiment
from helpers import require_engine
from test_cli import knob_experiment

SCHEMAS = Path(__file__).parent.parent / "stacklab" / "report" / "schemas"
STACKLAB = Path(sys.executable).parent / "stacklab"     # the installed entry point
NGINX, APACHE = "ng0000000016", "ap0000000016"          # c=16 trials of fakes.py


def schema(name: str) -> dict:
    found = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(found)
    return found


def run(tmp_path, *argv) -> tuple[int, str, str]:
    """`stacklab ARGV…` in-process: its exit status, stdout and stderr."""
    out, err = (Console(file=io.StringIO(), width=240, color_system=None) for _ in "12")
    env = Environment(stdout=out, stderr=err, clock=lambda: "2026-01-02T03:04:05.000+00:00",
                      db=tmp_path / "r.db", lab_root=tmp_path / "lab")
    status = main([str(a) for a in argv], env)
    return status, out.file.getvalue(), err.file.getvalue()


def document(tmp_path, name: str, *argv, status=ExitStatus.OK) -> dict:
    """The JSON of `stacklab ARGV… --json`, checked against schemas/NAME.schema.json."""
    code, out, err = run(tmp_path, *argv, "--json")
    assert code == status, out + err
    doc = json.loads(out)
    jsonschema.validate(doc, schema(name))
    return doc


def view(db: Path, experiment: str):
    store = Store.open(db)
    try:
        return load_view(store, experiment)
    finally:
        store.close()


@pytest.fixture
def db(tmp_path):
    """`fixed` (nginx twice apache's req/s, 5 repetitions, apache c=16 once limited by
    the load engine) with one failed run of apache c=1, and `faster` (nginx 1.5×)."""
    path = tmp_path / "r.db"
    fake_experiment(path, "fixed", reps=5)
    store = Store.open(path)
    store.add_run(RunRecord(experiment_id=1, trial_id="ap0000000001", repetition=6,
                            outcome=Outcome.FAILED, reason="apache exited with status 1",
                            started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:00:01",
                            knobs={}, versions={}, configs={}))
    store.close()
    fake_experiment(path, "faster", speed={"nginx": 30000.0, "apache": 10000.0}, reps=5)
    return path


# show ----------------------------------------------------------------------------------

def test_show_json_has_every_stored_trial_with_its_figures(tmp_path, db):
    doc = document(tmp_path, "show", "show", "fixed", "--db", db)
    stored = view(db, "fixed")
    assert doc["experiment"] == {"id": 1, "name": "fixed", "status": stored.status}
    assert [t["trial_id"] for t in doc["trials"]] == [s.trial_id for s in stored.summaries]
    assert len(doc["trials"]) == 4
    for t, s in zip(doc["trials"], stored.summaries):
        assert t["rps"]["median"] == s.rps.median and t["rps"]["interval"] == list(s.rps.ci)
        assert t["rps"]["interval_kind"] == "range" and t["rps"]["repetitions"] == 5
        assert t["latency_us"] == {"p50": s.p50_us, "p99": s.p99_us}
        assert t["runs_ok"] == 5 and t["errors"] == s.errors == 0
        assert [v["check"] for v in t["verdicts"]] == [v.check for v in s.verdicts]
    trials = {t["trial_id"]: t for t in doc["trials"]}
    assert trials["ng0000000001"]["rps"]["median"] == 20402.0    # show's table: 20,402
    assert [f["flag"] for f in trials[APACHE]["flags"]] == ["generator-bound"]
    assert [v["status"] for v in trials[NGINX]["verdicts"]] == ["PASS", "PASS"]
    assert trials["ap0000000001"]["runs_failed"] == 1
    assert trials["ap0000000001"]["verdicts"] == []      # of its latest run, the failed one
    assert trials["ap0000000001"]["reasons"] == [{"outcome": "failed",
                                                  "why": "apache exited with status 1"}]
    assert doc["common_knobs"] == {"load.keepalive": True}
    by_c = {h["concurrency"]: h for h in doc["headlines"]}
    first, limited = by_c[1], by_c[16]
    assert (first["leader"], first["other"]) == ("ng0000000001", "ap0000000001")
    assert first["rps"]["ratio"] == pytest.approx(2.0)
    assert (first["verdict"], first["reason"]) == ("better", None)
    # nginx c=16 leads apache c=16, which the load engine limited: a bound, no verdict
    assert limited["verdict"] == "no-verdict"
    assert limited["reason"] == limited["bound"]["reason"] == "generator-bound"
    assert "winner" not in first and "significant" not in first["rps"]
    _, text, _ = run(tmp_path, "show", "fixed", "--db", db)
    assert " ".join(first["text"].split()) in " ".join(text.split())


# compare -------------------------------------------------------------------------------

def test_compare_json_of_two_trials_has_the_ratio_the_table_prints(tmp_path, db):
    doc = document(tmp_path, "compare", "compare", NGINX, APACHE, "-e", "fixed", "--db", db)
    assert doc["compared"] == "trials" and doc["gate"] is None
    assert (doc["a"]["trial_id"], doc["b"]["trial_id"]) == (NGINX, APACHE)
    rows = {(r["metric"], r["component"]): r for r in doc["rows"]}
    s = {x.trial_id: x for x in view(db, "fixed").summaries}
    expected = {m.metric: m for m in compare_trials(s[NGINX], s[APACHE])}
    assert len(doc["rows"]) == len(expected)
    rps = rows["rps", None]
    assert rps["ratio"] == expected["req/s"].comparison.ratio
    assert rps["ci95"] == list(expected["req/s"].comparison.ci)
    assert rps["p"] == expected["req/s"].comparison.p
    assert (rps["median_a"], rps["median_b"]) == (23432.0, 11716.0)
    _, text, _ = run(tmp_path, "compare", NGINX, APACHE, "-e", "fixed", "--db", db)
    row = next(line for line in text.splitlines() if line.startswith("req/s"))
    assert f"{rps['ratio']:.3f}" == "0.500" and "≥ 0.500" in row
    # apache c=16 was limited by the load engine once: a bound, as the table says
    assert rps["bound"]["relation"] == "≥" and rps["bound"]["reason"] == "generator-bound"
    assert (rps["verdict"], rps["reason"], rps["text"]) == (
        "no-verdict", "generator-bound", expected["req/s"].verdict)
    assert "no verdict: generator-bound" in row
    assert all("significant" not in r and r["verdict"] in VERDICTS for r in doc["rows"])
    assert rows["p99_ms", None]["median_a"] == expected["p99 ms"].comparison.median_a


def test_compare_json_with_a_failing_gate_judges_and_exits_3(tmp_path, db):
    nginx, apache = "ng0000000001", "ap0000000001"      # c=1: neither side limited
    doc = document(tmp_path, "compare", "compare", nginx, apache, "-e", "fixed", "--db", db,
                   "--fail-if", "rps<-5%", "--fail-if", "p99>+900%", status=ExitStatus.GATE)
    s = {x.trial_id: x for x in view(db, "fixed").summaries}
    limits = [parse_threshold("rps<-5%"), parse_threshold("p99>+900%")]
    expected = judge(s[nginx], s[apache], limits)
    gate = doc["gate"]
    assert gate["outcome"] == "fail" and not gate["strict"]
    assert [(j["threshold"], j["outcome"]) for j in gate["judgements"]] == [
        ("rps<-5%", "fail"), ("p99>+900%", "pass")]
    assert [j["ratio"] for j in gate["judgements"]] == [e.ratio for e in expected]
    assert gate["judgements"][0]["ci95"] == list(expected[0].ci)
    assert gate["judgements"][0]["limit_ratio"] == pytest.approx(0.95)


def test_compare_json_with_a_passing_gate_exits_0(tmp_path, db):
    doc = document(tmp_path, "compare", "compare", NGINX, APACHE, "-e", "fixed", "--db", db,
                   "--fail-if", "rps<-60%")
    assert doc["gate"]["outcome"] == "pass" and len(doc["gate"]["judgements"]) == 1


def test_compare_json_of_two_experiments_pairs_trials_by_definition(tmp_path, db):
    doc = document(tmp_path, "compare", "compare", "fixed", "faster", "--db", db)
    assert doc["compared"] == "experiments"
    assert (doc["a"]["experiment"], doc["b"]["experiment"]) == ("fixed", "faster")
    assert {(r["trial_id"], r["metric"]) for r in doc["rows"]} == {
        (t, m) for t in ("ng0000000001", "ng0000000016", "ap0000000001", "ap0000000016")
        for m in ("rps", "p50_ms", "p99_ms")}
    rps = {r["trial_id"]: r for r in doc["rows"] if r["metric"] == "rps"}
    assert rps["ng0000000001"]["ratio"] == pytest.approx(1.5)     # the table: 1.500
    assert rps["ap0000000001"]["ratio"] == pytest.approx(1.0)
    assert (rps["ng0000000001"]["median_a"], rps["ng0000000001"]["median_b"]) == (
        20402.0, 30603.0)
    assert rps["ng0000000001"]["series"] == "nginx static-page"
    verdicts = {(r["trial_id"], r["metric"]): r["verdict"] for r in doc["rows"]}
    assert verdicts["ng0000000001", "rps"] == "better"         # 1.5×, interval beyond 1
    assert verdicts["ng0000000001", "p99_ms"] == "better"       # lower latency
    assert verdicts["ap0000000001", "rps"] == "same"            # the same figures
    assert verdicts["ap0000000016", "rps"] == "no-verdict"      # limited on both sides
    assert doc["differences"] == []          # one database, one host, the same versions


# recommend -----------------------------------------------------------------------------

def test_recommend_json_ranks_the_knob_and_names_the_best_variant(tmp_path):
    db = tmp_path / "k.db"
    knob_experiment(db)
    doc = document(tmp_path, "recommend", "recommend", "sendfile", "--db", db)
    [effect] = effects(view(db, "sendfile"), REGISTRY)
    [e] = doc["effects"]
    assert (e["rank"], e["knob"], e["value"], e["default"]) == (1, "nginx.sendfile", False, True)
    assert e["gain"] == effect.gain == pytest.approx(0.5)
    assert e["rps"]["ci95"] == list(effect.comparison.ci) and e["verdict"] == "better"
    assert e["meaning"] == REGISTRY.get("nginx.sendfile").meaning
    [best] = doc["best"]
    assert (best["trial_id"], best["default_trial_id"]) == ("sf00000000016", "sf10000000016")
    assert best["rps"] == 30000.0 and best["knobs"] == {"nginx.sendfile": False}
    assert best["vs_defaults"]["ratio"] == pytest.approx(1.5)
    assert best["best_single"]["knob"] == "nginx.sendfile"


# doctor and workloads ------------------------------------------------------------------

def test_doctor_json_says_each_component_and_feature(tmp_path, monkeypatch):
    monkeypatch.setattr("stacklab.commands.listing.tools", lambda: [
        Tool("nginx", "1.22.1", "apt-get install nginx", needed=True),
        Tool("apache", None, "apt-get install apache2", needed=True),
        Tool("wrk", None, "apt-get install wrk", needed=False, optional=True)])
    monkeypatch.setattr("stacklab.commands.listing.features", lambda: [
        Feature("cgroup memory", False, "no memory controller", "machine.memory_mb")])
    doc = document(tmp_path, "doctor", "doctor", status=ExitStatus.ERROR)  # apache missing
    assert doc["ready"] is False
    assert doc["components"] == [
        {"name": "nginx", "found": True, "version": "1.22.1",
         "install": "apt-get install nginx", "needed": True, "optional": False},
        {"name": "apache", "found": False, "version": None,
         "install": "apt-get install apache2", "needed": True, "optional": False},
        {"name": "wrk", "found": False, "version": None, "install": "apt-get install wrk",
         "needed": False, "optional": True}]
    assert doc["features"] == [{"name": "cgroup memory", "available": False,
                                "detail": "no memory controller", "knob": "machine.memory_mb"}]


def test_doctor_json_on_this_machine_has_every_component_version(tmp_path):
    require_engine()
    doc = document(tmp_path, "doctor", "doctor")
    found = {c["name"]: c for c in doc["components"]}
    for name, comp in COMPONENTS.items():
        assert found[name]["version"] == comp.version(), name
    assert found["stacklab-load"]["found"] and doc["ready"] is True
    assert doc["features"]


def test_workloads_json_lists_what_each_deploys_and_the_stacks_that_serve_it(tmp_path):
    doc = document(tmp_path, "workloads", "workloads")
    assert [w["name"] for w in doc["workloads"]] == list(WORKLOADS)
    for w in doc["workloads"]:
        real = WORKLOADS[w["name"]]
        assert w["needs"] == list(real.needs)
        assert [(u["path"], u["weight"]) for u in w["urls"]] == list(real.urls)
    by_name = {w["name"]: w for w in doc["workloads"]}
    # any server, but the external one, which serves its own content and no workload
    assert by_name["static-page"]["stacks"] == [n for n in STACKS if n != "external"]
    assert "nginx" not in by_name["php-page"]["stacks"]
    assert "nginx+php-fpm" in by_name["php-page"]["stacks"]
    assert by_name["app-show"]["stacks"] and all(
        "mariadb" in STACKS[s].components for s in by_name["app-show"]["stacks"])
    assert by_name["app-show"]["database"] is True
    assert by_name["static-page"]["parameter"] == "size"


# the schemas refuse what they should ---------------------------------------------------

@pytest.mark.parametrize("name, argv, path", [
    ("show", ["show", "fixed"], ["trials", 0, "rps"]),
    ("show", ["show", "fixed"], ["schema_version"]),
    ("show", ["show", "fixed"], ["headlines", 0, "verdict"]),
    ("compare", ["compare", NGINX, APACHE, "-e", "fixed"], ["rows", 0, "reason"]),
    ("compare", ["compare", NGINX, APACHE, "-e", "fixed"], ["rows", 0, "ratio"]),
    ("compare", ["compare", "ng0000000001", "ap0000000001", "-e", "fixed", "--fail-if",
                 "rps<-5%"], ["gate", "judgements", 0, "outcome"]),
    ("recommend", ["recommend"], ["best"]),
    ("doctor", ["doctor"], ["components", 0, "version"]),
    ("workloads", ["workloads"], ["workloads", 0, "stacks"]),
])
def test_a_schema_refuses_a_document_missing_a_required_field(tmp_path, db, monkeypatch,
                                                               name, argv, path):
    monkeypatch.setattr("stacklab.commands.listing.tools", lambda: [
        Tool("nginx", "1.22.1", "apt-get install nginx", needed=True)])
    monkeypatch.setattr("stacklab.commands.listing.features", lambda: [])
    code, out, err = run(tmp_path, *argv, "--db", db, "--json") if name not in (
        "doctor", "workloads") else run(tmp_path, *argv, "--json")
    assert code in (ExitStatus.OK, ExitStatus.GATE), out + err
    doc = json.loads(out)
    jsonschema.validate(doc, schema(name))
    broken = copy.deepcopy(doc)
    *parents, last = path
    target = broken
    for key in parents:
        target = target[key]
    del target[last]
    with pytest.raises(jsonschema.ValidationError, match=repr(last)):
        jsonschema.validate(broken, schema(name))


def test_the_schemas_know_every_verdict_and_reason_code():
    """The vocabulary the documents use is the one analyze decides in."""
    row = schema("compare")["$defs"]["row"]["properties"]
    show = schema("show")["$defs"]
    for verdict, reason in ((row["verdict"], row["reason"]),
                            (show["verdict_kind"], show["reason"])):
        assert tuple(verdict["enum"]) == VERDICTS
        assert tuple(reason["oneOf"][1]["enum"]) == REASONS


@pytest.mark.parametrize("name, version", [("show", 5), ("compare", 4)])
def test_a_document_of_the_old_shape_is_refused(tmp_path, db, name, version):
    """Version 1 had `significant`, `winner` and verdict words: its readers must not take
    version 2 for it, nor a version 1 document pass as 2."""
    argv = ["show", "fixed"] if name == "show" else ["compare", NGINX, APACHE, "-e", "fixed"]
    doc = document(tmp_path, name, *argv, "--db", db)
    assert doc["schema_version"] == version
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "schema_version": 1}, schema(name))
    old = copy.deepcopy(doc)
    if name == "show":
        old["headlines"][0]["winner"] = old["headlines"][0].pop("leader")
    else:
        old["rows"][0]["significant"] = True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(old, schema(name))


def test_a_schema_refuses_another_version(tmp_path):
    doc = document(tmp_path, "workloads", "workloads")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "schema_version": 2}, schema("workloads"))


# shell completion ----------------------------------------------------------------------

def stacklab(*argv, **env) -> subprocess.CompletedProcess:
    return subprocess.run([str(STACKLAB), *argv], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def test_show_completion_prints_the_script_of_the_shell_named():
    bash = stacklab("--show-completion", "bash")
    assert bash.returncode == 0, bash.stderr
    assert "complete -o default -F _stacklab_completion stacklab" in bash.stdout
    assert "_STACKLAB_COMPLETE=complete_bash" in bash.stdout
    zsh = stacklab("--show-completion", "zsh")
    assert zsh.returncode == 0 and zsh.stdout.lstrip().startswith("#compdef stacklab")
    fish = stacklab("--show-completion", "fish")
    assert fish.returncode == 0 and fish.stdout.startswith("complete --command stacklab")
    unknown = stacklab("--show-completion", "tcsh")
    assert unknown.returncode == 2 and "tcsh" in unknown.stderr


def test_the_completion_the_script_asks_for_names_stacklabs_commands_and_options():
    commands = stacklab(_STACKLAB_COMPLETE="complete_bash", COMP_WORDS="stacklab sh",
                        COMP_CWORD="1")
    assert commands.returncode == 0 and commands.stdout.split() == ["show"]
    options = stacklab(_STACKLAB_COMPLETE="complete_zsh",
                       _TYPER_COMPLETE_ARGS="stacklab compare --fai")
    assert options.returncode == 0 and "--fail-if" in options.stdout


def test_install_completion_writes_the_script_where_the_shell_reads_it(tmp_path):
    installed = stacklab("--install-completion", "bash", HOME=str(tmp_path))
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / ".bash_completions" / "stacklab.sh"
    assert "_stacklab_completion" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()
