"""Issue 21, "bad input gets one line": an experiment file that would plan for minutes,
overflow after the servers start, measure nothing, exclude nothing, ask for more memory
than the host has, or never end being read is refused at once, through the CLI as a user
meets it, in one line naming the file, the key and the value."""

import os
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.errors import SpecError
from stacklab.experiment.spec import parse_spec

MAX_TRIALS = 10_000   # the limit the issue asks for

HEAD = """
[experiment]
name = "bad"
{experiment}

[matrix]
stack = ["nginx", "apache"]
workload = ["static-page"]
concurrency = [1, 4]
{matrix}
"""


def dry_run(tmp_path, experiment='duration = "1s"', matrix="", extra="", spec=None):
    """`stacklab run SPEC --dry-run`: (the file, the result, its output as one line)."""
    if spec is None:
        spec = tmp_path / "bad.toml"
        spec.write_text(HEAD.format(experiment=experiment, matrix=matrix) + extra)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                      "--dry-run"])
    return spec, result, " ".join(result.output.split())


def refused(tmp_path, *fragments, **spec):
    """The file is refused (exit 2, no traceback) with one line naming `fragments`."""
    path, result, line = dry_run(tmp_path, **spec)
    assert result.exit_code == 2, result.output
    assert str(path) in line, line
    for fragment in fragments:
        assert fragment in line, line
    return line


def test_a_matrix_beyond_the_limit_is_refused_before_it_is_built(tmp_path):
    """2 stacks x 2 concurrencies x 7 knob axes of 10 values: 40 M points, counted by
    multiplying, so the refusal comes at once (6.4 M took minutes and GBs to plan)."""
    axes = "\n".join(f"net.{k} = {list(range(1, 11))}" for k in
                     ("rtt_ms", "tcp_fin_timeout", "tcp_keepalive_time", "somaxconn",
                      "rmem_max", "wmem_max"))
    started = time.monotonic()
    line = refused(tmp_path, "matrix = 40000000", str(MAX_TRIALS),
                   matrix=axes + "\nload.rate = " + str(list(range(1, 11))))
    assert time.monotonic() - started < 10, line


def matrix(concurrency: int) -> dict:
    return {"experiment": {"name": "m", "duration": "1s"},
            "matrix": {"stack": ["nginx", "apache"], "workload": ["static-page"],
                       "concurrency": list(range(1, concurrency + 1))}}


def test_the_limit_is_on_the_product_of_the_axes(spec_args):
    """2 stacks x 5000 concurrencies is the limit; one more concurrency is over it."""
    assert parse_spec(matrix(MAX_TRIALS // 2), "m.toml", *spec_args)
    with pytest.raises(SpecError) as e:
        parse_spec(matrix(MAX_TRIALS // 2 + 1), "m.toml", *spec_args)
    assert e.value.key == "matrix" and e.value.value == MAX_TRIALS + 2


@pytest.mark.parametrize("experiment, key, value", [
    ('duration = "99999999999h"', "experiment.duration", "99999999999h"),
    ("duration = 1e308", "experiment.duration", "1e+308"),
    ('duration = "25h"', "experiment.duration", "25h"),
    ('duration = "1s"\nwarmup = "99999999999h"', "experiment.warmup", "99999999999h"),
    ('duration = "1s"\nwarmup = 1e308', "experiment.warmup", "1e+308"),
    ("requests = 9223372036854775807", "experiment.requests", "9223372036854775807"),
])
def test_durations_and_requests_beyond_their_bounds_are_refused(tmp_path, experiment, key,
                                                                value):
    refused(tmp_path, key, value, experiment=experiment)


def test_a_day_is_still_a_duration(tmp_path):
    _, result, line = dry_run(tmp_path, experiment='duration = "24h"\nwarmup = "24h"')
    assert result.exit_code == 0, line


@pytest.mark.parametrize("value", ['"1ms"', '"99ms"', "0.05", "0"])
def test_a_duration_too_short_to_measure_is_refused(tmp_path, value):
    """1 ms of load gave a failed run and exit 0."""
    refused(tmp_path, "experiment.duration", "0.1 s", experiment=f"duration = {value}")


@pytest.mark.parametrize("experiment, key, number", [
    ('duration = "2000"', "experiment.duration", "2000"),
    ('duration = "1s"\nwarmup = "0.5"', "experiment.warmup", "0.5"),
])
def test_a_duration_without_its_unit_is_refused(tmp_path, experiment, key, number):
    """"2000" was 2000 s, where 2 s was meant."""
    refused(tmp_path, key, f"'{number}' has no unit", f"'{number}ms' or '{number}s'",
            experiment=experiment)


def test_the_shortest_duration_is_accepted(tmp_path):
    _, result, line = dry_run(tmp_path, experiment='duration = "100ms"')
    assert result.exit_code == 0, line


def test_an_exclude_rule_that_excludes_no_trial_is_refused(tmp_path):
    """Apache has no nginx knob: the rule's points are trials that run anyway."""
    line = refused(tmp_path, "matrix.exclude[1]", "excludes no trial", matrix=(
        "nginx.worker_processes = [1, 2]\n"
        'exclude = [{stack = "nginx", concurrency = 4},'
        ' {stack = "apache", nginx = {worker_processes = 2}}]'))
    assert "matrix.exclude[0]" not in line


def test_an_exclude_rule_whose_points_run_anyway_is_refused(tmp_path):
    """Apache has no nginx knob: its points with worker_processes = 2 are apache's one
    trial, which runs anyway, so the rule removes nothing."""
    refused(tmp_path, "matrix.exclude[0]", "excludes no trial", matrix=(
        "nginx.worker_processes = [1, 2]\n"
        'exclude = [{stack = "apache", nginx = {worker_processes = 2}}]'))


def test_a_rule_that_repeats_what_others_exclude_is_kept(tmp_path):
    """S3's plan spells out each case it leaves out, some twice: harmless."""
    _, result, line = dry_run(tmp_path, matrix=(
        'exclude = [{stack = "apache", concurrency = 1}, {concurrency = 1}]'))
    assert result.exit_code == 0, line


def test_overlapping_exclude_rules_that_each_remove_a_trial_are_kept(tmp_path):
    _, result, line = dry_run(tmp_path, matrix=(
        'exclude = [{stack = "apache"}, {concurrency = 1}]'))
    assert result.exit_code == 0, line


def test_an_exclude_rule_that_excludes_a_trial_is_kept(tmp_path):
    _, result, line = dry_run(tmp_path, matrix=(
        "nginx.worker_processes = [1, 2]\n"
        'exclude = [{stack = "nginx", nginx = {worker_processes = 2}}]'))
    assert result.exit_code == 0, line


def host_memory_mb() -> int:
    with open("/proc/meminfo") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return kib // 1024


def test_more_memory_than_the_host_has_is_refused(tmp_path):
    wanted = 1 << 20                                       # 1 TiB, the knob's maximum
    assert host_memory_mb() < wanted, "this host has 1 TiB: no larger limit to refuse"
    refused(tmp_path, "machine.memory_mb", str(wanted), "MemTotal",
            extra=f"\n[knobs.machine]\nmemory_mb = {wanted}\n")


def test_a_directory_fifo_or_device_is_refused_before_reading(tmp_path):
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    done = threading.Event()
    results = {}

    def run():
        results["fifo"] = dry_run(tmp_path, spec=fifo)
        done.set()
    threading.Thread(target=run, daemon=True).start()
    if not done.wait(10):
        with open(fifo, "w"):    # unblock the reader so the thread ends
            pass
        pytest.fail("reading a FIFO as an experiment file blocked")
    for spec, result, line in (results["fifo"], dry_run(tmp_path, spec=tmp_path),
                               dry_run(tmp_path, spec=Path("/dev/zero"))):
        assert result.exit_code == 2, line
        assert str(spec) in line and "not a regular file" in line, line


def test_a_file_over_a_mebibyte_is_refused_before_reading(tmp_path):
    big = tmp_path / "big.toml"
    big.write_text(HEAD.format(experiment='duration = "1s"', matrix="") +
                   "#" * (1 << 20) + "\n")
    refused(tmp_path, "1 MiB", spec=big)
