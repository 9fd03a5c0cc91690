"""Calibration against a known truth: how often each verdict comes out when the answer is
known, beside other work on this machine. Run by hand (not by `make test`: it takes an
hour or more, and its table is a benchmark's figures, not a test's assertion).

    .venv/bin/python bench/calibration.py [--experiments 20] [--db PATH] [--cells ...]
    .venv/bin/python bench/calibration.py --db PATH --table   # the stored ones, judged

The workload's CPU cost per request is set exactly: nginx + PHP-FPM on `php-cpu` (an md5
chain of 20,000 rounds a request), 2 connections, 1 s a run, repetitions = "auto" (6
rounds, then one more of each undecided comparison up to 10: the answer `show` gives).
Beside each verdict at the default margin (±5%), how often A/A would be `same` within
±10% (experiment.margin = "10%", for a host whose runs vary more).
Each experiment compares two trials whose true ratio is known:

- A/A: `php.realpath_cache_size_kb` 4096 (the default) against 4097, one trial under two
  names (a realpath cache of one script is not filled either way): the truth is 1, so
  the right verdict is `same`, and better or worse is an error.
- 1.10×: `machine.cpu_quota` 0.50 against 0.55 cores for the whole stack, which this
  page uses whole at any quota (it would take two cores): req/s follows the quota, the
  truth is 1.10×, the right verdict `better`, and `same` is wrong.
- 10×: `machine.cpu_quota` 0.05 against 0.50: the truth is 10×.

A quota small enough to be granted beside the other work keeps the truth what it is:
0.55 cores fit beside one hog, 0.5 beside two (the stack's cgroup gets a fair share of
at least that). Host conditions: quiet (nothing started; whatever else this machine ran
is said in each run's record); one hog (`python3 -c "while True: pass"`); two hogs; a
hog 3 s on, 3 s off. Runs measured again because the host was busy are switched off
(`remeasure = 0`): beside a hog every run is, and the paired design is what is measured.

Every run is stored (default database: a directory under the system's temporary one;
`--db` to keep it) and an experiment already complete there is counted, not run again:
interrupted, it resumes. Printed: a line per experiment, then per cell how often each
verdict came out, the right one's share, and the mean rounds run."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from statistics import fmean
from typing import Iterator

from stacklab.analysis.analyze import compare_trials, load_view
from stacklab.commands.run import measured, planned
from stacklab.env import Environment
from stacklab.errors import NotFound
from stacklab.experiment.spec import parse_spec
from stacklab.stacks import REGISTRY, STACKS
from stacklab.store import Store
from stacklab.workloads import WORKLOADS

# effect -> (knob, A's value, B's value, the right verdict of B against A)
EFFECTS = {
    "A/A": ("php.realpath_cache_size_kb", 4096, 4097, "same"),
    "1.10x": ("machine.cpu_quota", 0.50, 0.55, "better"),
    "10x": ("machine.cpu_quota", 0.05, 0.50, "better"),
}
SPIN = "while True: pass"
ON_OFF = ("import time\nwhile True:\n    end = time.time() + 3\n    while time.time() < end:"
          "\n        pass\n    time.sleep(3)")
CONDITIONS = {"quiet": (), "one hog": (SPIN,), "two hogs": (SPIN, SPIN),
              "hog on and off": (ON_OFF,)}
# The cells first, in this order: what time allows is the top of the list.
CELLS = [("A/A", "quiet"), ("A/A", "one hog"), ("1.10x", "one hog"), ("10x", "one hog"),
         ("A/A", "two hogs"), ("A/A", "hog on and off"), ("1.10x", "quiet"),
         ("10x", "two hogs")]
VERDICTS = ("better", "worse", "same", "no-verdict")
DURATION, CONNECTIONS, ROUNDS = 1.0, 2, 10
WIDER = 0.10      # the margin a noisier host may need: how often A/A is `same` within it


def slug(effect: str, condition: str, i: int) -> str:
    return f"cal-{effect.replace('/', '').replace('.', '')}-{condition.replace(' ', '-')}-{i:02d}"


def spec(name: str, effect: str, seed: int, duration: float = DURATION,
         connections: int = CONNECTIONS, rounds: int = ROUNDS):
    knob, a, b, _ = EFFECTS[effect]
    doc = {"experiment": {"name": name, "repetitions": "auto", "max_repetitions": rounds,
                          "duration": duration, "warmup": 0.5, "remeasure": 0,
                          "seed": seed},
           "load": {"keepalive": True},
           "matrix": {"stack": ["nginx+php-fpm"], "workload": ["php-cpu"],
                      "concurrency": [connections], knob.split(".")[0]: {knob.split(".")[1]: [a, b]}}}
    return parse_spec(doc, f"bench/calibration.py:{name}", REGISTRY, STACKS, set(WORKLOADS))


@contextmanager
def host(condition: str) -> Iterator[None]:
    """The condition's other work running, stopped however the block ends."""
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for code in CONDITIONS[condition]]
    try:
        yield
    finally:
        for p in hogs:
            p.kill()
            p.wait()


def complete(store: Store, name: str):
    """The experiment `name` of `store` when it is stored complete, else None (a bench
    counts it and does not run it again)."""
    try:
        row = store.experiment(name)
    except NotFound:
        return None
    return row if row.status == "complete" else None


def verdict(db: Path, name: str, effect: str) -> tuple[str, str, int, bool] | None:
    """(verdict of B against A on req/s, its reason, rounds, whether it is `same` within
    WIDER) of a complete experiment; None when it is not stored complete."""
    store = Store.open(db)
    try:
        if complete(store, name) is None:
            return None
        view = load_view(store, name)
    finally:
        store.close()
    knob, a_value, b_value, _ = EFFECTS[effect]
    by_value = {s.knobs.get(knob): s for s in view.summaries}
    a, b = by_value[a_value], by_value[b_value]
    m = compare_trials(a, b)[0]
    d = m.decision
    wider = replace(m, margin=WIDER).decision.kind == "same"
    return d.kind, d.reason or "", m.comparison.paired or min(m.comparison.n), wider


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=20, help="per cell")
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--cells", nargs="*", default=None,
                        help='"EFFECT/CONDITION" (e.g. "10x/two hogs"); default: all')
    parser.add_argument("--table", action="store_true",
                        help="only the table of the experiments already stored complete")
    args = parser.parse_args()
    # a TERM (a kill, a CI's timeout) unwinds like an interrupt: the hogs are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    db = args.db or Path(tempfile.mkdtemp(prefix="stacklab-calibration-")) / "bench.db"
    cells = CELLS if not args.cells else [tuple(c.rsplit("/", 1)) for c in args.cells]
    env = Environment.default()
    print(f"database: {db}", flush=True)
    results: dict[tuple[str, str], list[tuple[str, str, int, bool]]] = {}
    for effect, condition in cells:
        for i in range(1, args.experiments + 1):
            name = slug(effect, condition, i)
            got = verdict(db, name, effect)
            if got is None and args.table:
                continue
            if got is None:
                s, plan = planned(spec(name, effect, i))
                with host(condition):
                    measured(env, s, plan, db, False, False, False, False,
                             "bench/calibration.py")
                got = verdict(db, name, effect)
            results.setdefault((effect, condition), []).append(got)
            print(f"{effect} {condition} #{i}: {got[0]}"
                  + (f" ({got[1]})" if got[1] else "") + f", {got[2]} rounds"
                  + (f", same within ±{WIDER:.0%}" if got[3] else ""), flush=True)
    print()
    print(table(results))
    return 0


def table(results: dict[tuple[str, str], list[tuple[str, str, int, bool]]]) -> str:
    head = (f"{'effect':6} {'host':15} {'n':>3} " + " ".join(f"{v:>10}" for v in VERDICTS)
            + f" {'right':>6} {'rounds':>6} {f'same ±{WIDER:.0%}':>9}")
    lines = [head, "─" * len(head)]
    for (effect, condition), got in results.items():
        n = len(got)
        if not n:
            continue
        share = {v: sum(g[0] == v for g in got) / n for v in VERDICTS}
        right = share[EFFECTS[effect][3]]
        lines.append(f"{effect:6} {condition:15} {n:>3} "
                     + " ".join(f"{share[v]:>10.0%}" for v in VERDICTS)
                     + f" {right:>6.0%} {fmean(g[2] for g in got):>6.1f}"
                     + f" {sum(g[3] for g in got) / n:>9.0%}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
