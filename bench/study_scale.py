"""How `show`, `export --format json`, `recommend` and `report` grow with the size of a
study (issue 14): run by hand, not by `make test` (a busy machine would make a timed
assertion flaky).

    .venv/bin/python bench/study_scale.py [--runs 54 540 5400] [--repeat 3]

Each size is a store of fabricated runs (trials × 3 repetitions, the engine's real
report shape with a histogram and a 10-second per-second series, from tests/fakes.py),
built once in --dir and reused.
Each command runs in-process, output discarded; the median of --repeat timings is
printed, and each size's ratio against the first size (linear growth: ratio ≈ size
ratio).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fakes import VERDICTS, fake_load, fake_resources  # noqa: E402
from test_report_charts import with_timeseries  # noqa: E402

from stacklab.commands import results  # noqa: E402
from stacklab.measure.drive import LoadReport  # noqa: E402
from stacklab.env import Environment  # noqa: E402
from stacklab.store import Outcome, RunRecord, Store  # noqa: E402

REPETITIONS = 3
STACKS = ("nginx", "apache", "caddy")
CONCURRENCY = (1, 4, 16, 64, 256)
MEASURED_S = 10.0       # each run's measured phase: 10 points of its per-second series


def trials_of(count: int) -> list[tuple[str, str, dict]]:
    """`count` trials: stacks × concurrencies × a knob value, like a study's grid."""
    out = []
    for i in range(count):
        stack = STACKS[i % len(STACKS)]
        c = CONCURRENCY[(i // len(STACKS)) % len(CONCURRENCY)]
        workers = 1 + i // (len(STACKS) * len(CONCURRENCY))
        d = {"stack": stack, "workload": "static-page", "concurrency": c,
             "knobs": {f"{stack}.workers": workers, "load.keepalive": True},
             "measure": {"duration_s": 2.0}}
        out.append((f"t{i:09d}", f"{stack} static-page c={c} workers={workers}", d))
    return out


def build(db: Path, runs: int) -> None:
    """A store of `runs` fabricated OK runs (runs / 3 trials × 3 repetitions)."""
    store = Store.open(db)
    trials = trials_of(runs // REPETITIONS)
    exp = store.new_experiment("study", "study.toml", "h", {"experiment": {
        "description": "fabricated study-sized experiment"}}, trials,
        {"cores": 2, "cpu_model": "Bench CPU", "kernel": "6.1", "memory_mib": 1024},
        "0.1.0", "abc123", "2026-01-01T00:00:00+00:00")
    for rep in range(1, REPETITIONS + 1):
        for n, (tid, _, d) in enumerate(trials):
            rps = 10000.0 * (1 + n % 7 / 10) * (1 + (rep - 2) * 0.01)
            store.add_run(RunRecord(
                experiment_id=exp, trial_id=tid, repetition=rep, outcome=Outcome.OK,
                started_at="2026-01-01T00:00:00", ended_at="2026-01-01T00:00:03",
                knobs={d["stack"]: {}}, versions={d["stack"]: "1.0", "stacklab-load": "0.1.0"},
                configs={f"{d['stack']}/x.conf": "listen 127.0.0.1:8080;"},
                verdicts=VERDICTS,
                load=LoadReport.from_json(with_timeseries(fake_load(
                    rps, 1e6 * d["concurrency"] / rps, seed=rep * 100_000 + n,
                    duration_s=MEASURED_S), seed=n)),
                resources=fake_resources(d["stack"], 2.0 * rps * 2e-5,
                                         10.0 + d["concurrency"]),
                flags=[], run_dir="/tmp/x"))
    store.close()


def store_of(directory: Path, runs: int) -> Path:
    db = directory / f"study-{runs}-v2.db"    # v2: runs carry a per-second series
    if not db.exists():
        partial = db.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        build(partial, runs)
        partial.rename(db)
    return db


def commands(db: Path, out: Path) -> dict:
    env = Environment(stdout=Console(file=io.StringIO(), width=140),
                      stderr=Console(file=io.StringIO()), clock=lambda: "", db=db,
                      lab_root=out)
    return {"show": lambda: results.show(env, None, db),
            "export": lambda: results.export(env, None, db, "json", out / "export.json"),
            "recommend": lambda: results.recommend(env, None, db),
            "report": lambda: results.report(env, None, db, out / "report.html")}


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[54, 540, 5400])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "stacklab-bench")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    medians: dict[int, dict[str, float]] = {}
    for runs in args.runs:
        db = store_of(args.dir, runs)
        medians[runs] = {name: timed(fn, args.repeat)
                         for name, fn in commands(db, args.dir).items()}
        base = args.runs[0]
        print(f"{runs:>6} runs: " + "  ".join(
            f"{name} {t:.3f} s (×{t / medians[base][name]:.1f})"
            for name, t in medians[runs].items()) + f"   [size ×{runs / base:g}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
