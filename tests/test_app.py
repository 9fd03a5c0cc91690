"""The application layer on its own: the whole CLI run in-process in an Environment of
the test's choosing (consoles, database), the one error boundary and its exit statuses,
the chart registry the report loops over, and the one formatter of each figure."""

import errno
import io
import re
import sqlite3
from dataclasses import FrozenInstanceError, replace
from types import SimpleNamespace

import pymysql
import pytest
from rich.console import Console

from stacklab import errors
from stacklab.cli import error_line, main
from stacklab.env import Environment
from stacklab.errors import ExitStatus, NotFound, SpecError, StacklabError
from stacklab.report import charts, fmt
from stacklab.report.html import render_html

from fakes import fake_experiment


def console() -> Console:
    return Console(file=io.StringIO(), width=200, color_system=None)


@pytest.fixture
def env(tmp_path):
    """Output to two buffers, results in tmp_path, a fixed clock."""
    return Environment(stdout=console(), stderr=console(), clock=lambda: "2026-01-02T03:04:05Z",
                       db=tmp_path / "results" / "r.db", lab_root=tmp_path / "lab")


def text(c: Console) -> str:
    return c.file.getvalue()


# the CLI in-process ------------------------------------------------------------------

def test_a_command_reads_the_environments_database_and_prints_on_its_console(env):
    fake_experiment(env.db, "fixed")
    assert main(["show"], env) == ExitStatus.OK
    shown = text(env.stdout)
    assert "fixed (experiment 1" in shown and "ng0000000016" in shown
    assert text(env.stderr) == ""


def test_db_given_on_the_command_line_wins_over_the_environments(env, tmp_path):
    fake_experiment(tmp_path / "other.db", "elsewhere")
    assert main(["show", "--db", str(tmp_path / "other.db")], env) == ExitStatus.OK
    assert "elsewhere" in text(env.stdout)


def test_export_writes_the_text_as_is_on_the_environments_stdout(env):
    fake_experiment(env.db, "fixed")
    assert main(["export", "--format", "csv"], env) == ExitStatus.OK
    lines = text(env.stdout).splitlines()
    assert lines[0].startswith("experiment_id,trial_id,label,")
    assert all("│" not in line for line in lines)       # no table, no wrapping


def test_an_error_is_one_line_on_stderr_with_its_exit_status(env):
    fake_experiment(env.db, "fixed")
    assert main(["show", "nope"], env) == ExitStatus.BAD_INPUT
    assert text(env.stdout) == ""
    [line] = text(env.stderr).splitlines()
    assert line.startswith("stacklab: error: ") and "'nope'" in line


def test_a_missing_database_is_named_and_not_created(env):
    assert main(["show"], env) == ExitStatus.ERROR
    assert str(env.db) in text(env.stderr) and not env.db.exists()


def test_traceback_is_a_parsed_option_that_lets_the_error_through(env):
    fake_experiment(env.db, "fixed")
    with pytest.raises(NotFound):
        main(["--traceback", "show", "nope"], env)


def test_the_dry_run_plans_without_touching_the_database(env, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[experiment]\nremeasure = 0\nname = "s"\nrequests = 10\nrepetitions = 2\n'
                    '[matrix]\nstack = ["nginx"]\nworkload = ["static-page"]\n'
                    'concurrency = [1, 4]\n')
    assert main(["run", str(spec), "--dry-run"], env) == ExitStatus.OK
    assert "2 trials × 2 repetitions = 4 runs" in text(env.stdout)
    assert not env.db.exists() and not env.lab_root.exists()


def test_a_bad_spec_exits_bad_input_naming_file_key_and_value(env, tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('[experiment]\nremeasure = 0\nname = "b"\nrequests = 10\n[matrix]\nstack = ["nginx"]\n'
                    'workload = ["static-page"]\nconcurrency = [1, "many"]\n')
    assert main(["run", str(spec)], env) == ExitStatus.BAD_INPUT
    [line] = text(env.stderr).splitlines()
    assert str(spec) in line and "matrix.concurrency" in line and "'many'" in line


def test_the_listings_print_on_the_environments_console(env):
    assert main(["workloads"], env) == ExitStatus.OK
    assert re.search(r"│ static-page +│ any server", text(env.stdout))
    assert main(["stacks"], env) == ExitStatus.OK
    assert "nginx.sendfile" in text(env.stdout)


def test_a_database_server_error_raised_by_a_command_is_one_line(env, monkeypatch):
    def refuse():
        raise pymysql.err.OperationalError(2003, "Can't connect to MySQL server on 'x'")
    monkeypatch.setattr("stacklab.commands.listing.tools", refuse)
    assert main(["doctor"], env) == ExitStatus.ERROR
    assert text(env.stderr).splitlines() == [
        "stacklab: error: MariaDB: Can't connect to MySQL server on 'x' (error 2003)"]


def test_the_default_environment():
    import os
    from pathlib import Path
    from stacklab.env import user_db
    env = Environment.default()
    assert env.db == user_db(os.environ, Path.home()) == env.database(None)
    assert env.lab_root.name.startswith("stacklab-")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", env.clock())


# the boundary ------------------------------------------------------------------------

@pytest.mark.parametrize("error, status, line", [
    (SpecError("x.toml", "matrix.stack", "nope", "no such stack"), ExitStatus.BAD_INPUT,
     "x.toml: matrix.stack = 'nope': no such stack"),
    (NotFound("'zz': no trial"), ExitStatus.BAD_INPUT, "'zz': no trial"),
    (errors.StackError("nginx did not start"), ExitStatus.ERROR, "nginx did not start"),
    (errors.Interrupted("interrupted: resume"), ExitStatus.INTERRUPTED, "interrupted: resume"),
    (KeyboardInterrupt(), ExitStatus.INTERRUPTED, "interrupted"),
    (sqlite3.OperationalError("no such table: runs"), ExitStatus.ERROR,
     "results database: no such table: runs"),
    (sqlite3.OperationalError("near \"\x1b[31m\": syntax error"), ExitStatus.ERROR,
     "results database: near \"\\x1b[31m\": syntax error"),
    (pymysql.err.OperationalError(1045, "Access denied"), ExitStatus.ERROR,
     "MariaDB: Access denied (error 1045)"),
    (pymysql.err.InterfaceError("(0, '')"), ExitStatus.ERROR, "MariaDB: (0, '')"),
    (OSError(errno.ENOENT, "No such file or directory", "/x/y"), ExitStatus.ERROR,
     "/x/y: No such file or directory"),
    (OSError("disk on fire\n"), ExitStatus.ERROR, "disk on fire\\n"),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None)
def test_what_the_boundary_says_and_exits_with(error, status, line):
    assert error_line(error) == (status, line)


@pytest.mark.parametrize("error", [ValueError("a bug"), KeyError("x"), AssertionError()])
def test_a_bug_keeps_its_traceback(error):
    assert error_line(error) is None


def test_each_error_class_names_its_exit_status():
    bad_input = (errors.SpecError, errors.UsageError, errors.NotFound, errors.UnsafePathError)
    failed = (errors.StacklabError, errors.StackError, errors.EngineError, errors.StoreError,
              errors.LabError)
    assert {cls.exit_status for cls in bad_input} == {ExitStatus.BAD_INPUT}
    assert {cls.exit_status for cls in failed} == {ExitStatus.ERROR}
    assert errors.Interrupted.exit_status == ExitStatus.INTERRUPTED == 130
    assert all(cls.exit_code == int(cls.exit_status) for cls in bad_input + failed)


def test_a_subclass_that_sets_only_exit_code_gets_the_matching_status():
    class Old(StacklabError):
        exit_code = 130
    assert Old.exit_status is ExitStatus.INTERRUPTED and Old.exit_code == 130


# the report's registries and formatters ----------------------------------------------

@pytest.fixture
def view(tmp_path):
    from stacklab.analysis.analyze import load_view
    from stacklab.store import Store
    fake_experiment(tmp_path / "r.db", "fixed")
    store = Store.open(tmp_path / "r.db")
    yield load_view(store, "fixed")
    store.close()


def test_the_report_shows_each_registered_chart_once_with_its_caption(view, monkeypatch):
    def figures(html):
        return re.findall(r'<figure class="chart-([\w-]+)"><div class="plot"></div>'
                          r'<script type="application/json" class="figure">.*?'
                          r'<figcaption>(.*?)</figcaption>', html, re.S)
    names = [c.name for c in charts.CHARTS]
    assert names == ["throughput", "latency", "spectrum", "persecond", "transfer", "cpu",
                     "memory"]
    html = render_html(view)
    assert [name for name, _ in figures(html)] == names        # one workload
    extra = charts.Chart("extra", charts.transfer_chart, "One more figure & its caption.")
    monkeypatch.setattr(charts, "CHARTS", (*charts.CHARTS, extra))
    shown = figures(render_html(view))
    assert shown[-1] == ("extra", "One more figure &amp; its caption.")
    assert len(shown) == len(names) + 1


def estimate(median, ci, values=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)):
    return SimpleNamespace(median=median, ci=ci, values=values, is_range=len(values) < 6)


@pytest.mark.parametrize("written, expected", [
    (fmt.number(None), "—"),
    (fmt.number(23432.4), "23,432"),
    (fmt.number(1234.56, 1), "1,234.6"),
    (fmt.number(0.04, 2), "0.04"),
    (fmt.ms(None), "—"),
    (fmt.ms(1234.0), "1.23"),
    (fmt.ms(1_500_000.0), "1500.00"),
    (fmt.p_value(None), "—"),
    (fmt.p_value(0.0004), "< 0.001"),
    (fmt.p_value(0.0123), "0.012"),
    (fmt.ratio_ci(None), "—"),
    (fmt.ratio_ci((1.5, 2.25)), "1.50–2.25×"),
    (fmt.ratio_ci((0.5, 1.0), 3, ""), "0.500–1.000"),
    (fmt.change(0.5), "+50.0%"),
    (fmt.change(-0.031), "-3.1%"),
    (fmt.vs(None), "—"),
    (fmt.vs(SimpleNamespace(ratio=None, p=None, verdict="")), "—"),
    (fmt.vs(SimpleNamespace(ratio=1.0, p=1.0, verdict="~")), "same variant"),
    (fmt.vs(SimpleNamespace(ratio=1.523, p=0.01, verdict="B wins")), "1.52× (B wins)"),
    (fmt.vs(SimpleNamespace(ratio=348.78, p=0.001, verdict="349×")), "349×"),
    (fmt.vs(SimpleNamespace(ratio=4.0, p=0.2, verdict="~ no significant difference")),
     "4.00× (~ no significant difference)"),
    (fmt.ci(estimate(20000.0, (19500.0, 21000.0))), "19,500–21,000"),
    (fmt.ci(estimate(20000.0, (19500.0, 21000.0), (19500.0, 20000.0, 21000.0))),
     "range 19,500–21,000"),
    (fmt.ci(estimate(None, None, ())), "—"),
    (fmt.ci_ms(estimate(1000.0, (900.0, 1250.0))), "0.90–1.25"),
])
def test_one_formatter_per_figure(written, expected):
    assert written == expected


def test_the_text_and_html_reports_share_the_formatters():
    from stacklab.report import headline, html, text
    assert text.number is fmt.number and text.vs is fmt.vs and text.ci_text is fmt.ci_text
    assert headline.p_value is fmt.p_value
    assert not any(hasattr(html, name) for name in ("_num", "_one", "_ms", "_ci", "_vs"))


def test_replace_keeps_an_environment_frozen(env):
    other = replace(env, stdout=console())
    assert other.db == env.db and other.stdout is not env.stdout
    with pytest.raises(FrozenInstanceError):
        env.db = None
