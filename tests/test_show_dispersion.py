"""The high-dispersion path from stored runs into `stacklab show`: a trial whose
repetitions measured different conditions says so in show's text, with the numbers,
beside the trial it concerns; one whose repetitions stay within 1.5× says nothing."""

import io
import re

import pytest
from rich.console import Console

from stacklab.cli import main
from stacklab.env import Environment
from stacklab.errors import ExitStatus

from fakes import fake_experiment


def shown(tmp_path, rps: list[float]) -> str:
    """`stacklab show` in-process, for the fixed experiment whose nginx c=1 trial ran
    at `rps` in its three repetitions."""
    out = Console(file=io.StringIO(), width=200, color_system=None)
    env = Environment(stdout=out, stderr=Console(file=io.StringIO()),
                      clock=lambda: "2026-01-02T03:04:05Z", db=tmp_path / "r.db",
                      lab_root=tmp_path / "lab")
    fake_experiment(env.db, "fixed", flag_apache_256=False,
                    rps_of={"ng0000000001": rps})
    assert main(["show"], env) == ExitStatus.OK
    return out.file.getvalue()


def test_repetitions_1_6x_apart_get_the_high_dispersion_note(tmp_path):
    text = shown(tmp_path, [10_000.0, 13_000.0, 16_000.0])
    row = next(line for line in text.splitlines() if line.startswith("nginx static-page    1"))
    assert re.search(r" ⚑1\b", row)                      # the trial's row is marked
    [note] = [line for line in text.splitlines() if line.startswith("⚑")]
    assert note.startswith("⚑1 nginx static-page c=1: high-dispersion — ")
    assert "req/s over 3 repetitions from 10,000 to 16,000 (1.6× apart, limit 1.5×)" in note


@pytest.mark.parametrize("rps", [[10_000.0, 12_000.0, 14_000.0], [10_000.0, 15_000.0]])
def test_repetitions_within_1_5x_get_no_note(tmp_path, rps):
    # padded at the start: a first run 1.5× off two alike would be history-dependent
    text = shown(tmp_path, [rps[0]] * (3 - len(rps)) + rps)
    assert "high-dispersion" not in text and "⚑" not in text
