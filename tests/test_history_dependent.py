"""history-dependent (issue 39): a trial whose first run lies outside the range of the
runs after it by more than 2× their spread and more than 25% of their median. Pinned at
its edges, where each figure is exact in floating point: a limit moved, or > turned into
≥, fails a row. Then the path from stored runs into `stacklab show`, in the order the
runs were measured."""

import io

import pytest
from rich.console import Console

from stacklab.analysis.flags import history_dependent
from stacklab.cli import main
from stacklab.env import Environment
from stacklab.errors import ExitStatus

from fakes import fake_experiment


# The others 1,000 and 1,100: spread 100 (2× = 200), median 1,050 (25% = 262.5): the
# median's share decides. The others 1,000 and 1,400: spread 400 (2× = 800), median
# 1,200 (25% = 300): the spread decides.
@pytest.mark.parametrize("rps, raised", [
    ([1_362.5, 1_000.0, 1_100.0], False),      # on 25% above the range: not over
    ([1_363.0, 1_000.0, 1_100.0], True),
    ([737.5, 1_000.0, 1_100.0], False),        # on 25% below
    ([737.0, 1_000.0, 1_100.0], True),
    ([2_200.0, 1_000.0, 1_400.0], False),      # on 2× the spread above
    ([2_201.0, 1_000.0, 1_400.0], True),
    ([200.0, 1_000.0, 1_400.0], False),        # on 2× the spread below
    ([199.0, 1_000.0, 1_400.0], True),
    ([1_250.0, 1_000.0, 1_000.0], False),      # the others alike: 25% of them decides
    ([1_251.0, 1_000.0, 1_000.0], True),
    ([1_050.0, 1_000.0, 1_100.0], False),      # inside their range
    ([6_555.0, 1_860.0, 1_950.0, 2_012.0], True),     # the file sessions on disk
    ([8_196.0, 8_584.0, 8_400.0, 8_300.0], False),    # the same on a tmpfs
    ([5_000.0, 1_000.0], False),               # 2 runs: no "rest" to judge by
    ([5_000.0], False), ([], False),
    ([5_000.0, 0.0, 1_000.0], False),          # a run that served nothing: not judged
])
def test_the_first_run_beyond_twice_the_spread_and_a_quarter(rps, raised):
    assert (history_dependent(rps) is not None) == raised


def test_the_detail_gives_the_numbers_and_the_side():
    flag = history_dependent([6_555.0, 1_860.0, 1_950.0, 2_012.0])
    assert flag.name == "history-dependent"
    assert ("the first of 4 runs measured 6,555 req/s, the 3 after it 1,860 to 2,012 "
            "(median 1,950): it was 4,543 req/s faster than their range, 29.9× their "
            "spread (limit 2×) and 233% of their median (limit 25%)") in flag.detail
    assert "slower than their range, their spread is 0" in history_dependent(
        [500.0, 1_000.0, 1_000.0]).detail


def shown(tmp_path, rps: list[float]) -> str:
    """`stacklab show` in-process, for the fixed experiment whose nginx c=1 trial ran at
    `rps` in its repetitions (stored in that order)."""
    out = Console(file=io.StringIO(), width=250, color_system=None)
    env = Environment(stdout=out, stderr=Console(file=io.StringIO()),
                      clock=lambda: "2026-01-02T03:04:05Z", db=tmp_path / "r.db",
                      lab_root=tmp_path / "lab")
    fake_experiment(env.db, "fixed", flag_apache_256=False, reps=len(rps),
                    rps_of={"ng0000000001": rps})
    assert main(["show"], env) == ExitStatus.OK
    return out.file.getvalue()


def test_a_first_run_apart_is_said_with_its_trial(tmp_path):
    text = shown(tmp_path, [16_000.0, 10_000.0, 10_200.0, 10_100.0])
    [note] = [line for line in text.splitlines() if line.startswith("⚑")]
    assert note.startswith("⚑1 nginx static-page c=1: ")
    assert "history-dependent — the first of 4 runs measured 16,000 req/s" in note


def test_a_last_run_apart_is_not_history(tmp_path):
    text = shown(tmp_path, [10_000.0, 10_200.0, 10_100.0, 16_000.0])
    assert "history-dependent" not in text
