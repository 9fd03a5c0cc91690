"""The tuner against random search on a space measured whole (issue 26's first target):
run by hand, not by `make test`.

    .venv/bin/python bench/tune_reference.py [--trials 40] [--seeds 5]
    .venv/bin/python bench/tune_reference.py --measure [--db DB]     # the fixture anew

The fixture (bench/fixtures/tune-reference.json) holds every combination of six knobs of
nginx + PHP-FPM on php-page (bench/tune-reference.toml, 144 trials), each measured twice
on real stacks by `stacklab run`. A replayed search asks its sampler for a trial exactly
as `stacklab tune` does (commands/tune.sampler, experiment/tunespace.suggest) and is told
one of that combination's two measured runs, drawn at random: what a search of one run
per trial would have seen. What it found is scored by the combination it would call
best (its best told value), at that combination's mean over both runs, as a share of
the best mean of all 144. Printed for the tuner and for Optuna's random sampler at equal
budget, per seed and as medians: the share after 10, 20 and `--trials` trials, and the
trials each needed to reach 95% and stay there (the target: ≤ 40, median over 5
seeds). Then, as `stacklab tune` answers: the search's best 3 (distinct) measured again,
`--final` runs each drawn from that combination's measured runs, and the best mean of
those chosen (`tune.candidates`), against the search's own best as told: how often each
is the exhaustive best, and its share of the best mean.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import subprocess
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacklab.analysis.analyze import load_view  # noqa: E402
from stacklab.commands.tune import sampler  # noqa: E402
from stacklab.experiment.tunespace import dimensions, suggest  # noqa: E402
from stacklab.stacks import REGISTRY  # noqa: E402
from stacklab.store import Store  # noqa: E402

SPEC = ROOT / "bench" / "tune-reference.toml"
FIXTURE = ROOT / "bench" / "fixtures" / "tune-reference.json"
TARGET = 0.95


def key(values: dict) -> str:
    return json.dumps(values, sort_keys=True)


def measure(db: Path) -> None:
    """Run the reference space (stacklab run, resumable) and write the fixture from it."""
    cmd = [str(ROOT / ".venv" / "bin" / "stacklab"), "run", str(SPEC), "--db", str(db)]
    if db.exists():
        cmd.append("--resume")
    subprocess.run(cmd, check=True)
    store = Store.open(db)
    try:
        view = load_view(store, store.experiment("tune-reference").id)
    finally:
        store.close()
    space = {}
    combos = []
    for s in view.summaries:
        values = {k: v for k, v in s.knobs.items() if not k.startswith("load.")}
        for k, v in values.items():
            space.setdefault(k, [])
            if v not in space[k]:
                space[k].append(v)
        combos.append({"values": values, "rps": list(s.rps.values)})
    run = view.runs[0]
    FIXTURE.write_text(json.dumps({
        "what": "every combination of the space on nginx+php-fpm, php-page, 8 connections, "
                "keep-alive, 2 s runs after 0.5 s warm-up, 2 runs each (req/s)",
        "measured": {"at": view.created_at, "host": platform.node(),
                     "cores": view.host.get("cpus"), "versions": run.versions,
                     "stacklab": subprocess.run(["git", "-C", str(ROOT), "rev-parse",
                                                 "--short", "HEAD"], capture_output=True,
                                                text=True).stdout.strip(),
                     "written": datetime.now(timezone.utc).isoformat(timespec="seconds")},
        "space": {k: sorted(v, key=repr) for k, v in sorted(space.items())},
        "combos": combos}, indent=1) + "\n")
    print(f"wrote {FIXTURE}: {len(combos)} combinations")


def search(optuna, dims, fixed, combos, sampler_, trials: int, rng: random.Random,
           truth: dict, best_truth: float, told_values: dict | None = None) -> list[float]:
    """Each trial's share of the best: the called-best combination's mean over the best
    mean, after each trial. `told_values`, when given, gets each combination's best told
    value (what the search ranks its candidates on)."""
    study = optuna.create_study(direction="maximize", sampler=sampler_)
    shares = []
    called, called_value = None, float("-inf")
    for _ in range(trials):
        trial = study.ask()
        values = suggest(trial, dims, fixed)
        told = rng.choice(combos[key(values)])
        study.tell(trial, told)
        if told_values is not None:
            told_values[key(values)] = max(told, told_values.get(key(values), told))
        if told > called_value:
            called, called_value = key(values), told
        shares.append(truth[called] / best_truth)
    return shares


def chosen(told: dict, combos: dict, candidates: int, final: int, rng: random.Random) -> str:
    """As tune.choose does: the `candidates` combinations told best, each measured again
    `final` times (runs drawn from its measured ones), the best mean of those."""
    tops = sorted(told, key=told.get, reverse=True)[:candidates]
    again = {k: statistics.mean(rng.choice(combos[k]) for _ in range(final)) for k in tops}
    return max(tops, key=lambda k: again[k])


def reached(shares: list[float]) -> int | None:
    """The trial from which the search's called best stays at 95% or more to its end (a
    later trial told a luckier run can call a worse combination best), or None."""
    at = None
    for i, s in enumerate(shares):
        if s < TARGET:
            at = None
        elif at is None:
            at = i + 1
    return at


def replay(trials: int, seeds: int, final: int = 5) -> None:
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    doc = json.loads(FIXTURE.read_text())
    dims = dimensions(REGISTRY, doc["space"])
    fixed = {d.key: d.default for d in dims}
    combos = {key(c["values"]): c["rps"] for c in doc["combos"] if c["rps"]}
    truth = {k: statistics.mean(v) for k, v in combos.items()}
    best_key = max(truth, key=truth.get)
    best_truth = truth[best_key]
    worst = min(truth.values())
    print(f"{len(combos)} combinations measured {doc['measured']['at']}: best "
          f"{best_truth:,.0f} req/s ({json.loads(best_key)}), worst {worst:,.0f}; "
          f"{sum(t >= TARGET * best_truth for t in truth.values())} within 95% of the best")
    print(f"a search of {trials} trials, one measured run told per trial; share of the "
          "best mean reached by the combination it calls best")
    marks = [m for m in (10, 20, trials) if m <= trials]
    print(f"{'sampler':8} {'seed':>4} " + " ".join(f"{'@' + str(m):>6}" for m in marks)
          + f" {'trials to 95%':>14}")
    results = {}
    for name in ("tpe", "random"):
        for seed in range(1, seeds + 1):
            s = (sampler(optuna, seed, trials) if name == "tpe"
                 else optuna.samplers.RandomSampler(seed=seed))
            shares = search(optuna, dims, fixed, combos, s, trials,
                            random.Random(seed), truth, best_truth)
            results.setdefault(name, []).append(shares)
            n = reached(shares)
            print(f"{name:8} {seed:>4} " + " ".join(f"{shares[m - 1]:>6.1%}" for m in marks)
                  + f" {n if n else 'never':>14}")
    print("medians over the seeds:")
    for name, runs in results.items():
        got = [reached(r) or trials + 1 for r in runs]
        med = statistics.median(got)
        print(f"{name:8} {'':>4} " + " ".join(
            f"{statistics.median(r[m - 1] for r in runs):>6.1%}" for m in marks)
            + f" {(f'{med:g}' if med <= trials else 'never'):>14}")
    print(f"the answer after {trials} trials (TPE, {seeds} seeds): the search's best as "
          f"told against the best of its top 3 measured again ({final} runs each)")
    for candidates in (1, 3):
        shares, exact = [], 0
        for seed in range(1, seeds + 1):
            told: dict = {}
            search(optuna, dims, fixed, combos, sampler(optuna, seed, trials), trials,
                   random.Random(seed), truth, best_truth, told)
            pick = chosen(told, combos, candidates, final, random.Random(1000 + seed))
            shares.append(truth[pick] / best_truth)
            exact += pick == best_key
        print(f"  {'top 3 measured again' if candidates > 1 else 'best as told':22} "
              f"median share {statistics.median(shares):.1%}, within 95% in "
              f"{sum(s >= TARGET for s in shares)} of {seeds}, the exhaustive best in "
              f"{exact} of {seeds}")
    t = statistics.median(reached(r) or trials + 1 for r in results["tpe"])
    r = statistics.median(reached(r) or trials + 1 for r in results["random"])
    at = statistics.median(x[-1] for x in results["tpe"])
    ra = statistics.median(x[-1] for x in results["random"])
    print(f"target ≥ 95% in ≤ {trials} trials (median): "
          f"{'met' if t <= trials else 'not met'} ({at:.1%}); "
          f"against random at equal budget: trials to 95% {t:g} vs {r:g}, "
          f"share at {trials} {at:.1%} vs {ra:.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--final", type=int, default=5, help="runs each candidate is measured again")
    ap.add_argument("--measure", action="store_true", help="measure the space anew")
    ap.add_argument("--db", type=Path, default=Path("/tmp/tune-reference/r.db"))
    a = ap.parse_args()
    if a.measure:
        a.db.parent.mkdir(parents=True, exist_ok=True)
        measure(a.db)
    replay(a.trials, a.seeds, a.final)


if __name__ == "__main__":
    main()
