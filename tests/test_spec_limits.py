"""Spec values that would misbehave later are one line naming file, key and value now,
before anything starts (through the CLI, as a user meets them)."""

import resource

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli

BASE = """
[experiment]
name = "limits"
{experiment}
duration = "1s"

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [{concurrency}]
"""


def run_spec(tmp_path, experiment="", concurrency="1", text=None):
    spec = tmp_path / "limits.toml"
    spec.write_text(text or BASE.format(experiment=experiment, concurrency=concurrency))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                      "--dry-run"])
    return spec, result


@pytest.mark.parametrize("experiment, key, value", [
    ("seed = -1", "experiment.seed", "-1"),
    ('repetitions = "auto"\nmax_repetitions = 4', "experiment.max_repetitions", "4"),
])
def test_values_that_misbehave_later_are_refused(tmp_path, experiment, key, value):
    spec, result = run_spec(tmp_path, experiment)
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert str(spec) in line and key in line and value in line


@pytest.mark.parametrize("nested", ["x = " + "[" * 5000 + "]" * 5000,
                                    "x = " + "[" * 900 + "1" + "]" * 900])
def test_deep_nesting_is_one_line_not_a_recursion_error(tmp_path, nested):
    text = BASE.format(experiment="", concurrency="1") + "\n[knobs]\n" + nested + "\n"
    spec, result = run_spec(tmp_path, text=text)
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, RecursionError)
    assert "nested too deeply" in result.output


def test_more_connections_than_open_files_allow_is_refused_before_start(tmp_path):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.fail("this machine has no hard open-files limit to exceed")
    spec, result = run_spec(tmp_path, concurrency=str(hard))
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert "matrix.concurrency" in line and str(hard) in line and "open files" in line


def test_more_engine_threads_than_pinned_cpus_is_refused(tmp_path):
    """Threads sharing fewer CPUs would hide a saturated engine from generator-bound."""
    spec, result = run_spec(tmp_path, concurrency="4", text=BASE.format(
        experiment="", concurrency="4") + '\n[load]\ncpus = "0"\nthreads = 2\n')
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert "load.threads = 2" in line and "load.cpus = '0'" in line
    _, fine = run_spec(tmp_path, text=BASE.format(experiment="", concurrency="4")
                       + '\n[load]\ncpus = "0"\nthreads = 1\n')
    assert fine.exit_code == 0, fine.output
