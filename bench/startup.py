"""How long the command line takes to answer, start-up included (issue 41): each command
a fresh process, as a user types it. Run by hand, not by `make test` (a busy machine
would make a timed assertion flaky).

    .venv/bin/python bench/startup.py [--repeat 7] [--dir DIR]

Timed: `stacklab --version`, `--help`, `list`, and `show`, `compare` (two trials) and
`export --format json` over a 540-run experiment (the fabricated store of
bench/study_scale.py, built once in --dir). Printed: each one's median wall time over
--repeat runs, its target, and beside it `python -c pass` measured in the same rounds
(the interpreter's own start on this machine, which no import order can remove).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from study_scale import store_of

ROOT = Path(__file__).resolve().parent.parent
STACKLAB = str(Path(sys.executable).with_name("stacklab"))
# (name, arguments, target in seconds)
COMMANDS = [("python -c pass", None, None), ("--version", ["--version"], 0.3),
            ("--help", ["--help"], 0.3), ("list", ["list"], 0.5),
            ("show", ["show"], 1.0), ("compare", ["compare", "t000000000", "t000000001"], 1.0),
            ("export", ["export", "--format", "json", "-o", "{out}"], 1.0)]


def once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "stacklab-bench")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    db = store_of(args.dir, 540)
    out = str(args.dir / "export.json")
    argvs = {name: ([sys.executable, "-c", "pass"] if rest is None else
                    [STACKLAB, "--db", str(db), *(a.format(out=out) for a in rest)]
                    if rest[0] not in ("--version", "--help") else [STACKLAB, *rest])
             for name, rest, _ in COMMANDS}
    times: dict[str, list[float]] = {name: [] for name in argvs}
    for _ in range(args.repeat):        # rounds: each command once a round, interleaved
        for name, argv in argvs.items():
            times[name].append(once(argv))
    print(f"median of {args.repeat} (540 runs where a database is read):")
    for name, _, target in COMMANDS:
        t = statistics.median(times[name])
        verdict = "" if target is None else (
            f"  target ≤ {target:g} s: {'met' if t <= target else 'NOT met'}")
        print(f"  {name:<16} {t:6.3f} s{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
