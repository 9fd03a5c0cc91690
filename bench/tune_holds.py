"""Does a tuned configuration hold when deployed again? Run by hand (real stacks; about
10 minutes for the quick preset), not by `make test`.

    .venv/bin/python bench/tune_holds.py [PRESET] [--db DB] [--deployments 3]

`stacklab tune PRESET` as a user runs it (search, choice among the best measured
again, final comparison), then the chosen configuration and the defaults measured again
on `--deployments` further fresh stacks each, interleaved in one more experiment
(`<name>.tune-holds`, the same path as the final comparison: tune.final). Printed: the
chosen's median req/s in its final comparison and in the further deployments, and what
it lost (the issue's target: at most 5%); and the same for its ratio to the defaults,
which a drift of the machine between the two experiments does not move.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacklab.commands.tune import defaults, final  # noqa: E402
from stacklab.env import Environment  # noqa: E402
from stacklab.experiment.spec import load_doc, parse_file_doc  # noqa: E402
from stacklab.stacks import REGISTRY, STACKS  # noqa: E402
from stacklab.workloads import WORKLOADS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("preset", type=Path, nargs="?",
                    default=ROOT / "presets" / "tune-apache-files.toml")
    ap.add_argument("--db", type=Path, default=Path("/tmp/tune-holds/r.db"))
    ap.add_argument("--deployments", type=int, default=3)
    a = ap.parse_args()
    a.db.parent.mkdir(parents=True, exist_ok=True)
    doc = load_doc(a.preset)
    spec = parse_file_doc(doc, a.preset, REGISTRY, STACKS, set(WORKLOADS))
    name = spec.experiment.name
    cmd = [str(ROOT / ".venv" / "bin" / "stacklab"), "tune", str(a.preset), "--db", str(a.db)]
    stored = Path(f"{a.db}.tune") / f"{name}.optuna.db"
    done = subprocess.run(cmd + (["--resume"] if stored.exists() else []),
                          capture_output=True, text=True)
    print(done.stdout[-3000:])
    if done.returncode:
        print(done.stderr[-2000:])
        return done.returncode
    number = int(re.search(r"^best: trial (\d+)", done.stdout, re.M).group(1))
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{stored}")
    fixed = defaults(spec)
    chosen = {k: v for k, v in study.trials[number].user_attrs["values"].items()
              if fixed.get(k) != v}
    env = Environment.default()
    again = f"{' '.join(cmd)} --resume"
    before = final(env, doc, a.preset, {"defaults": {}, "best": chosen},
                   spec.tune.final_repetitions, a.db, False, False, again, True, "tune-final")
    after = final(env, doc, a.preset, {"defaults": {}, "best": chosen}, a.deployments, a.db,
                  False, False, again, True, "tune-holds")
    was, now = before["best"].rps.median, after["best"].rps.median
    ratio_was = was / before["defaults"].rps.median
    ratio_now = now / after["defaults"].rps.median
    print(f"chosen trial {number} ({chosen}):")
    print(f"  final comparison: {was:,.0f} req/s ({ratio_was:.2f}x the defaults), "
          f"{len(before['best'].rps.values)} runs")
    print(f"  {a.deployments} further deployments: {now:,.0f} req/s ({ratio_now:.2f}x the "
          f"defaults): {now / was - 1:+.1%} (ratio {ratio_now / ratio_was - 1:+.1%}); "
          f"each {', '.join(f'{v:,.0f}' for v in after['best'].rps.values)}")
    print(f"  target: loses at most 5%: {'met' if now / was >= 0.95 else 'not met'} "
          f"(req/s), {'met' if ratio_now / ratio_was >= 0.95 else 'not met'} (ratio)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
