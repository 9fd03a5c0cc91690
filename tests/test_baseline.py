"""Baselines on stored runs, never timed ones: `report EXP --baseline OTHER` puts each
trial beside the baseline's trial of the same definition (req/s and p99 as NEW/BASELINE
with a 95% CI, p and a verdict), and `report --baseline` and `compare` across databases
name every host fact and component version the two sides differ in.

fake_experiment (fakes.py) stores one host and version 1.0 of every component; `restamp`
gives a database another host and other versions afterwards, as a database written on
another machine would hold."""

import dataclasses
import json
import sqlite3
from pathlib import Path

import jinja2
import jsonschema
import pytest
from typer.testing import CliRunner

from stacklab.analysis.analyze import Decision, load_view
from stacklab.cli import cli
from stacklab.commands.results import same_definition_pairs
from stacklab.errors import ExitStatus
from stacklab.report import charts
from stacklab.report.baseline import Change, compare_to_baseline, differences, warning
from stacklab.report.html import HELPERS, baseline_context, write_html
from stacklab.store import Store

from fakes import fake_experiment

BASE_HOST = {"cores": 2, "cpu_model": "Test CPU", "kernel": "6.1.0-18", "memory_mib": 1024}
NEW_HOST = {**BASE_HOST, "kernel": "6.1.0-21", "hostname": "another"}
SPEEDS = {"nginx": 20000.0, "apache": 10000.0}
FASTER = {"nginx": 40000.0, "apache": 10000.0}     # nginx 2× faster, apache the same


def restamp(db, host: dict, versions: dict[str, str]) -> None:
    """Every experiment of `db` on `host`; its runs' component versions updated by
    `versions` (a component its run did not use is not added)."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE experiments SET host_json = ?", (json.dumps(host),))
        for run_id, stored in conn.execute("SELECT id, versions_json FROM runs").fetchall():
            found = json.loads(stored)
            found.update({k: v for k, v in versions.items() if k in found})
            conn.execute("UPDATE runs SET versions_json = ? WHERE id = ?",
                         (json.dumps(found), run_id))
    conn.close()


@pytest.fixture
def two_hosts(tmp_path):
    """base.db: experiment "base"; new.db: experiment "new", nginx twice as fast, on a
    newer kernel with a newer nginx."""
    base, new = tmp_path / "base.db", tmp_path / "new.db"
    fake_experiment(base, name="base", speed=SPEEDS, flag_apache_256=False)
    fake_experiment(new, name="new", speed=FASTER, flag_apache_256=False)
    restamp(base, BASE_HOST, {"nginx": "1.22.1"})
    restamp(new, NEW_HOST, {"nginx": "1.24.0"})
    return base, new


def view(db, name):
    store = Store.open(db, readonly=True)
    try:
        return load_view(store, name)
    finally:
        store.close()


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def section(found) -> str:
    """The partial alone, rendered as the report renders it (autoescaped, strict)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(charts.__file__).parent),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    return env.get_template("baseline.html.j2").render(**HELPERS, **baseline_context(found))


@pytest.fixture
def no_charts(monkeypatch):
    """Reports without their charts: what is tested here is the baseline section, and
    the charts are drawn elsewhere (and tested in test_report_charts.py)."""
    monkeypatch.setattr(charts, "draw", lambda part, reference=None: [])


def test_rows_judge_each_trial_against_the_same_definition(two_hosts):
    base, new = view(two_hosts[0], "base"), view(two_hosts[1], "new")
    found = compare_to_baseline(new, base, same_definition_pairs(new, base), "base.db")
    rows = {r.trial.trial_id: r for r in found.rows}
    assert sorted(rows) == ["ap0000000001", "ap0000000016", "ng0000000001", "ng0000000016"]
    assert not found.new_only and not found.base_only
    for tid in ("ng0000000001", "ng0000000016"):
        rps, p99 = rows[tid].rps, rows[tid].p99
        assert rps.ratio == pytest.approx(2.0) and rps.ci[0] > 1
        assert rps.change is Change.BETTER and rps.verdict == "better"
        assert rps.new == pytest.approx(2 * rps.base)
        assert p99.ratio < 1 and p99.ci[1] < 1 and p99.change is Change.BETTER
    for tid in ("ap0000000001", "ap0000000016"):
        rps, p99 = rows[tid].rps, rows[tid].p99
        assert rps.ratio == pytest.approx(1.0) and rps.ci[0] < 1 < rps.ci[1] or \
            rps.ci == (1.0, 1.0)
        assert rps.change is Change.SAME and rps.verdict == "same within ±5%"
        # two databases: two samples, not paired; p99's interval reaches past ±5%
        assert p99.change is Change.NONE and "reaches past ±5%" in p99.note


def test_the_slower_side_is_worse(two_hosts):
    base, new = view(two_hosts[1], "new"), view(two_hosts[0], "base")   # reversed
    found = compare_to_baseline(new, base, same_definition_pairs(new, base), "new.db")
    nginx = next(r for r in found.rows if r.trial.trial_id == "ng0000000001")
    assert nginx.rps.change is Change.WORSE and nginx.rps.ratio == pytest.approx(0.5)
    assert nginx.p99.change is Change.WORSE


def test_trials_without_a_partner_are_listed(two_hosts):
    conn = sqlite3.connect(two_hosts[0])      # the baseline's nginx c=16 ran at c=32
    with conn:
        [(stored,)] = conn.execute("SELECT definition_json FROM trials "
                                   "WHERE trial_id = 'ng0000000016'").fetchall()
        conn.execute("UPDATE trials SET definition_json = ?, label = ? "
                     "WHERE trial_id = 'ng0000000016'",
                     (json.dumps({**json.loads(stored), "concurrency": 32}),
                      "nginx static-page c=32"))
    conn.close()
    base, new = view(two_hosts[0], "base"), view(two_hosts[1], "new")
    found = compare_to_baseline(new, base, same_definition_pairs(new, base), "base.db")
    assert len(found.rows) == 3
    assert [s.trial_id for s in found.new_only] == ["ng0000000016"]
    assert [s.concurrency for s in found.base_only] == [32]
    html = section(found)
    assert "ng0000000016" not in html      # labels, not ids
    assert "nginx static-page c=16 (no baseline trial)" in html
    assert "nginx static-page c=32 (only in the baseline)" in html


def test_differences_name_each_fact_with_both_values(two_hosts):
    base, new = view(two_hosts[0], "base"), view(two_hosts[1], "new")
    assert [str(d) for d in differences(base, new)] == ["kernel 6.1.0-18 vs 6.1.0-21",
                                                        "nginx 1.22.1 vs 1.24.0"]
    line = warning(base, new)
    assert line.startswith("warning: ") and "(base vs new)" in line
    assert line.endswith("kernel 6.1.0-18 vs 6.1.0-21; nginx 1.22.1 vs 1.24.0")
    assert "hostname" not in line          # another name is not another machine
    assert warning(base, base) is None


def set_knob(db, component: str, knob: str, value) -> None:
    """Every run of `component`'s trials in `db` stored with `knob` = `value`, as if the
    default had been so when they ran."""
    conn = sqlite3.connect(db)
    with conn:
        for run_id, stored in conn.execute("SELECT id, knobs_json FROM runs").fetchall():
            knobs = json.loads(stored)
            if component in knobs:
                knobs[component][knob] = value
                conn.execute("UPDATE runs SET knobs_json = ? WHERE id = ?",
                             (json.dumps(knobs), run_id))
    conn.close()


def test_a_default_that_changed_between_the_two_is_a_difference(two_hosts):
    """Trials with the same definition ran with another effective setting: nginx shipped
    with sendfile off in the baseline's stacklab, on in the new one's."""
    set_knob(two_hosts[0], "nginx", "sendfile", False)
    set_knob(two_hosts[1], "nginx", "sendfile", True)
    set_knob(two_hosts[1], "apache", "keepalive_timeout", 5)     # a knob added since
    base, new = view(two_hosts[0], "base"), view(two_hosts[1], "new")
    assert [str(d) for d in differences(base, new)][2:] == [
        "apache.keepalive_timeout no such knob vs 5", "nginx.sendfile False vs True"]
    assert warning(base, new).endswith("; apache.keepalive_timeout no such knob vs 5; "
                                       "nginx.sendfile False vs True")
    html = section(compare_to_baseline(new, base, same_definition_pairs(new, base), "b.db"))
    assert "<b>nginx.sendfile</b> False vs True" in html
    assert [str(d) for d in differences(new, new)] == []


def test_the_section_shows_rows_and_differences(two_hosts):
    base, new = view(two_hosts[0], "base"), view(two_hosts[1], "new")
    html = section(compare_to_baseline(new, base, same_definition_pairs(new, base),
                                       "base.db"))
    assert html.startswith('<section id="baseline">') and "base.db" in html
    assert "<b>kernel</b> 6.1.0-18 vs 6.1.0-21; <b>nginx</b> 1.22.1 vs 1.24.0" in html
    assert html.count('class="l v-better">better</td>') == 4      # nginx's req/s and p99
    assert html.count('class="l v-same">same</td>') == 2          # apache's req/s
    assert html.count("no verdict (imprecise)") == 2               # apache's p99
    assert "2.000" in html and "Without a partner" not in html


def test_report_against_a_baseline_of_another_database(two_hosts, tmp_path, no_charts):
    base_db, new_db = two_hosts
    out = tmp_path / "report.html"
    result = invoke("report", "new", "--db", new_db, "--baseline", "base",
                    "--baseline-db", base_db, "-o", out)
    assert result.exit_code == 0, result.output
    # the rows in the terminal, the warning on stderr naming both values of each fact
    assert "against the baseline base" in result.stdout
    lines = result.stdout.splitlines()          # the trial's name, then its id, a row each
    at = next(n for n, line in enumerate(lines) if line.startswith("ng0000000001"))
    nginx = lines[at - 1:at + 1]
    assert [line.split()[-1] for line in nginx] == ["better", "better"], nginx
    assert "2.000" in nginx[0]
    warned = " ".join(result.stderr.split())
    assert "kernel 6.1.0-18 vs 6.1.0-21" in warned and "nginx 1.22.1 vs 1.24.0" in warned
    html = out.read_text()
    assert '<section id="baseline">' in html and 'id="baseline-provenance"' in html
    assert "<b>kernel</b> 6.1.0-18 vs 6.1.0-21" in html
    section = html.split('<section id="baseline">', 1)[1].split("</section>", 1)[0]
    assert section.count('class="l v-better">better</td>') == 4      # nginx's req/s and p99
    assert section.count('class="l v-same">same</td>') == 2          # apache's req/s


def test_compare_across_databases_warns(two_hosts):
    base_db, new_db = two_hosts
    result = invoke("compare", "base", "new", "--db", base_db, "--db-b", new_db)
    assert result.exit_code == 0, result.output
    warned = " ".join(result.stderr.split())
    assert "kernel 6.1.0-18 vs 6.1.0-21" in warned and "nginx 1.22.1 vs 1.24.0" in warned
    assert "B = new" in result.stdout
    gated = invoke("compare", "base", "new", "--db", base_db, "--db-b", new_db,
                   "--fail-if", "rps<-5%")
    assert gated.exit_code == 0, gated.output            # nothing got slower
    assert invoke("compare", "new", "base", "--db", new_db, "--db-b", base_db,
                  "--fail-if", "rps<-5%").exit_code == ExitStatus.GATE
    set_knob(new_db, "nginx", "sendfile", False)
    doc = json.loads(invoke("compare", "base", "new", "--db", base_db, "--db-b", new_db,
                            "--json").stdout)
    assert doc["differences"] == [{"fact": "kernel", "a": "6.1.0-18", "b": "6.1.0-21"},
                                  {"fact": "nginx", "a": "1.22.1", "b": "1.24.0"},
                                  {"fact": "nginx.sendfile", "a": None, "b": False}]
    schema = Path(charts.__file__).parent / "schemas" / "compare.schema.json"
    jsonschema.validate(doc, json.loads(schema.read_text()))


def test_the_same_host_and_versions_give_no_warning(tmp_path, no_charts):
    db = tmp_path / "r.db"
    fake_experiment(db, name="base", speed=SPEEDS, flag_apache_256=False)
    fake_experiment(db, name="new", speed=FASTER, flag_apache_256=False)
    compared = invoke("compare", "base", "new", "--db", db)
    assert compared.exit_code == 0 and not compared.stderr, compared.output
    reported = invoke("report", "new", "--db", db, "--baseline", "base",
                      "-o", tmp_path / "r.html")
    assert reported.exit_code == 0 and not reported.stderr, reported.output
    html = (tmp_path / "r.html").read_text()
    assert '<section id="baseline">' in html and "baseline-provenance" not in html
    # without --baseline, no section at all
    assert invoke("report", "new", "--db", db, "-o", tmp_path / "plain.html").exit_code == 0
    assert 'id="baseline' not in (tmp_path / "plain.html").read_text()


@pytest.mark.parametrize("args, status, fragment", [
    (("--baseline", "nope"), ExitStatus.BAD_INPUT,
     "--baseline 'nope': no experiment of that name or id in "),
    (("--baseline-db", "BASE"), ExitStatus.BAD_INPUT, "give --baseline too"),
    # as a missing --db: no database there is an error, not bad input
    (("--baseline", "base", "--baseline-db", "missing.db"), ExitStatus.ERROR,
     "--baseline-db missing.db: no results database there"),
])
def test_a_bad_baseline_is_one_line(two_hosts, tmp_path, args, status, fragment):
    args = [str(two_hosts[0]) if a == "BASE" else a for a in args]
    result = invoke("report", "new", "--db", two_hosts[1], *args, "-o", tmp_path / "x.html")
    assert result.exit_code == status, result.output
    [line] = [x for x in result.output.splitlines() if x.strip()]
    assert line.startswith("stacklab: error: ") and fragment in line, line
    assert not (tmp_path / "x.html").exists()


def test_an_unknown_baseline_exits_as_an_unknown_experiment(two_hosts, tmp_path):
    unknown = invoke("report", "nope", "--db", two_hosts[1], "-o", tmp_path / "x.html")
    baseline = invoke("report", "new", "--db", two_hosts[1], "--baseline", "nope",
                      "-o", tmp_path / "x.html")
    assert baseline.exit_code == unknown.exit_code == ExitStatus.BAD_INPUT


def test_db_b_compares_experiments_only(two_hosts):
    result = invoke("compare", "ng0000000001", "ap0000000001", "--db", two_hosts[0],
                    "--db-b", two_hosts[1])
    assert result.exit_code == ExitStatus.BAD_INPUT, result.output
    [line] = [x for x in result.output.splitlines() if x.strip()]
    assert line.startswith("stacklab: error: --db-b ") and "'ng0000000001'" in line, line


def test_a_limited_side_leaves_no_verdict_but_a_bound(tmp_path):
    """The baseline's apache c=16 has a generator-bound run: as in `compare`, a ratio
    against it is a bound, and a bound that does not point one way is no verdict."""
    db = tmp_path / "r.db"
    fake_experiment(db, name="base", speed=SPEEDS, flag_apache_256=True)
    fake_experiment(db, name="new", speed=SPEEDS, flag_apache_256=False)
    base, new = view(db, "base"), view(db, "new")
    found = compare_to_baseline(new, base, same_definition_pairs(new, base), str(db))
    limited = next(r for r in found.rows if r.trial.trial_id == "ap0000000016")
    assert limited.rps.change is Change.NONE
    assert limited.rps.verdict.startswith("no verdict (a bound, ≤ 1×: the baseline trial "
                                          "(apache static-page c=16) was limited by")
    assert all(r.rps.change is Change.SAME for r in found.rows if r is not limited)
    assert found.warning is None and not found.differences


def test_a_trial_with_one_run_a_side_has_no_verdict(tmp_path):
    db = tmp_path / "r.db"
    fake_experiment(db, name="base", speed=SPEEDS, flag_apache_256=True, reps=1)
    fake_experiment(db, name="new", speed=FASTER, flag_apache_256=False, reps=1)
    base, new = view(db, "base"), view(db, "new")
    found = compare_to_baseline(new, base, same_definition_pairs(new, base), str(db))
    assert {(m.change, m.verdict) for r in found.rows for m in (r.rps, r.p99)} == {
        (Change.NONE, "no verdict (fewer than 2 successful runs a side)")}
    assert "no verdict" in section(found)


def busy(v, factor: float):
    """`v` as if each of its runs had run beside other work that could slow it `factor`×."""
    return dataclasses.replace(v, summaries=[dataclasses.replace(s, disturbance=factor)
                                             for s in v.summaries])


def busy_pair(tmp_path):
    """nginx 1.2× its baseline's req/s, both sides beside work that could slow them 1.5×:
    the database, the baseline's view and the comparison."""
    db = tmp_path / "r.db"
    fake_experiment(db, name="base", speed=SPEEDS, flag_apache_256=False)
    fake_experiment(db, name="new", speed={"nginx": 24000.0, "apache": 10000.0},
                    flag_apache_256=False)
    base, new = busy(view(db, "base"), 1.5), busy(view(db, "new"), 1.5)
    return db, base, compare_to_baseline(new, base, same_definition_pairs(new, base), str(db))


def test_a_busy_host_is_named_never_a_veto(tmp_path):
    """nginx 1.2× its baseline's req/s (p < 0.001), both sides beside other work: the
    worst case of what it could have done (1.5× a side) used to veto the answer; now the
    interval decides and the busy sides are named beside it."""
    db, base, found = busy_pair(tmp_path)
    context = baseline_context(found)
    nginx = context["judged"][("ng0000000016", "req/s")]
    assert nginx.comparison.ratio == pytest.approx(1.2) and nginx.comparison.ci[0] > 1
    assert nginx.decision == Decision("better")
    assert "ran on a busy host" in nginx.verdict
    html = section(found)
    assert "v-better" in html and "no verdict (host-busy)" not in html


def test_verdicts_are_coloured_by_their_kind(two_hosts):
    base, new = view(two_hosts[0], "base"), view(two_hosts[1], "new")
    context = baseline_context(compare_to_baseline(new, base,
                                                   same_definition_pairs(new, base), "b"))
    kinds = context["baseline_chart"].data["kinds"]
    assert {k for (trial, _), k in kinds.items() if trial.startswith("nginx")} == {"better"}
    assert {k for (trial, m), k in kinds.items() if trial.startswith("apache")
            and m == "req/s"} == {"same"}
    colors = {t["name"]: t["marker"]["color"] for t in context["baseline_chart"].figure["data"]
              if t["mode"] == "markers"}
    assert colors == {"req/s: better": charts.VERDICT_COLORS["better"],
                      "req/s: same": charts.VERDICT_COLORS["same"],
                      "p99 ms: better": charts.VERDICT_COLORS["better"],
                      "p99 ms: no verdict": charts.VERDICT_COLORS["no-verdict"]}
    assert context["baseline_chart"].figure["layout"]["xaxis"]["type"] == "log"


def test_the_report_begins_against_its_baseline(two_hosts, tmp_path):
    base, new = view(two_hosts[0], "base"), view(two_hosts[1], "new")
    found = compare_to_baseline(new, base, same_definition_pairs(new, base), "base.db")
    html = write_html(new, tmp_path / "r.html", found).read_text()
    headline = html[html.index('<div class="headline" id="headline">'):]
    first = headline[headline.index("<p"):headline.index("</p>")]
    assert first.startswith('<p id="headline-baseline"><b>Against baseline base</b> '
                            "(experiment 1): req/s better in 2, same in 2 of 4 trials; "
                            "the largest: nginx static-page c=")
    assert "2.00× (95% CI" in first and first.endswith("better.")
    # on the charts: the throughput chart's baseline trace, the ratio chart
    assert '"name":"baseline base: nginx static-page"' in html
    assert html.count('<figure class="chart-baseline">') == 1
    assert 'id="headline-baseline"' not in write_html(new, tmp_path / "p.html").read_text()


def test_the_baseline_rows_follow_the_decision_on_a_busy_host(tmp_path):
    """The text table's row says what the decision says, and names the busy host beside
    it: a 1.2× ratio whose interval lies above 1 is better, whatever the worst case of
    what the host could have done."""
    db, base, found = busy_pair(tmp_path)
    nginx = next(r for r in found.rows if r.trial.trial_id == "ng0000000016")
    assert nginx.rps.ci[0] > 1 and nginx.rps.change is Change.BETTER
    assert "busy host" in nginx.rps.note
