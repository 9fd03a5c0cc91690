"""`stacklab capacity` against a real server whose capacity is known: run by hand (a
benchmark's figures, not a test's assertion; about 2-3 minutes a search).

    .venv/bin/python bench/capacity_server.py [--searches 10] [--workers 1]
        [--service-ms 2] [--load 0.8] [--percentile 99] [--db PATH]

The server: an HTTP server on loopback (Python's, one thread a connection) with
`--workers` workers, first come first served, each request holding the worker free
soonest for an exponential service time of mean `--service-ms` (drawn from a seeded
generator). Its schedule runs on the server's clock: a request starts when it was
received or when its worker is free, whichever is later, and is answered when its
service ends; a late wake-up delays that answer, never the worker's next. With the
engine's evenly paced open loop the queue is D/M/c, so the truth is the one of
bench/capacity_search.py: the rate at which the percentile of the time in system equals
the limit, the limit being that percentile at `--load` of the server's full rate.

Few workers make a steep edge: the percentile of the service time alone (4 ms × ln 100
= 18 ms for a p99 at 4 ms) is already near the limit at a low load for several workers,
which no step can tell from the limit; one worker's p99 triples from a low load to 80%.

What the model leaves out is what a real server adds: the engine, the loopback and
Python's parsing and threads take a fraction of a millisecond a request on the same two
cores, so the true capacity of this server is a little under the model's. A bracket that
holds the model's truth or lies just under it is right; one over it is wrong.

Each search is `stacklab capacity` on an experiment file with [external] at the server's
URL, 64 connections, default step and resolution, one search a run
(`--repetitions 1`, `remeasure = 0`: the server's own CPU is outside the lab, so every
run reads host-busy; its steps are still measured again within the search's budget), each stored in the database (default: a new one under the system's
temporary directory; an experiment already complete there is counted, not run again).
Printed: a line per search (its capacity, bracket and steps), then how often the bracket
held the truth, how often the capacity was over it, the median half-width and steps.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import capacity_search as model  # noqa: E402
from calibration import complete  # noqa: E402
from helpers import BodyHandler, serving  # noqa: E402
from stacklab.analysis.capacity import bracket  # noqa: E402
from stacklab.store import Store  # noqa: E402

STACKLAB = str(Path(sys.executable).with_name("stacklab"))


class ExponentialServer(ThreadingHTTPServer):
    """c workers, FIFO, exponential service times (see the module's docstring)."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, workers: int, mean_s: float, seed: int):
        super().__init__(("127.0.0.1", 0), BodyHandler)
        self.body = b"m" * 200
        self.lock = threading.Lock()
        self.free_at = [0.0] * workers
        self.mean_s, self.draw = mean_s, random.Random(seed)

    def delay_s(self) -> float:
        with self.lock:
            worker = min(range(len(self.free_at)), key=self.free_at.__getitem__)
            start = max(time.monotonic(), self.free_at[worker])
            self.free_at[worker] = start + self.draw.expovariate(1 / self.mean_s)
            done = self.free_at[worker]
        return max(0.0, done - time.monotonic())

    def handle_error(self, request, client_address) -> None:
        pass        # the engine closing its connections at a step's end: not a fault


def stored(db: Path, name: str) -> dict | None:
    """The search's record when its experiment is stored complete, else None."""
    if not db.exists():
        return None
    store = Store.open(db)
    try:
        row = complete(store, name)
        if row is None:
            return None
        run = list(store.runs(row.id))[-1]      # a run made again: the last one
        return run.resources.part("capacity") if run.resources else None
    finally:
        store.close()


def one_search(db: Path, directory: Path, name: str, url: str, slo: str) -> dict | None:
    spec = directory / f"{name}.toml"
    # remeasure = 0: the server's own CPU is outside the lab, so every run reads as
    # disturbed and would be made again whole
    spec.write_text(f"""[experiment]
name = "{name}"
remeasure = 0

[capacity]
slo = "{slo}"

[external]
url = "{url}"
paths = ["/"]

[matrix]
concurrency = [64]
""")
    subprocess.run([STACKLAB, "capacity", str(spec), "--repetitions", "1", "--db", str(db)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=False)
    return stored(db, f"{name}.capacity") or stored(db, name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=10)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--service-ms", type=float, default=2.0)
    parser.add_argument("--load", type=float, default=0.8)
    parser.add_argument("--percentile", type=float, default=99.0)
    parser.add_argument("--db", type=Path, default=None)
    args = parser.parse_args()
    model.MU = 1000 / args.service_ms
    full = args.workers * model.MU
    limit = model.truth_quantile(args.load * full, args.workers, args.percentile)
    truth = model.capacity_at(args.workers, args.percentile, limit)
    slo = f"p{args.percentile:g}<{limit * 1e6:.0f}us"
    db = args.db or Path(tempfile.mkdtemp(prefix="stacklab-capserver-")) / "bench.db"
    directory = db.parent
    print(f"database: {db}\n{args.workers} workers × exponential {args.service_ms:g} ms: "
          f"full rate {full:,.0f} req/s; {slo}: the truth (D/M/c) {truth:,.0f} req/s",
          flush=True)
    found = []
    for i in range(1, args.searches + 1):
        name = f"capserver-{args.workers}w-{args.service_ms:g}ms-{args.load:g}-p{args.percentile:g}-{i:02d}"
        record = stored(db, f"{name}.capacity") or stored(db, name)
        if record is None:
            with serving(ExponentialServer(args.workers, args.service_ms / 1000, i)) as server:
                url = f"http://127.0.0.1:{server.server_address[1]}/"
                started = time.monotonic()
                record = one_search(db, directory, name, url, slo)
                took = time.monotonic() - started
        else:
            took = float("nan")
        b = bracket(record) if record else None
        steps = len(record["steps"]) if record else 0
        found.append((b, steps))
        print(f"#{i}: capacity {record.get('capacity') if record else None}, bracket {b}, "
              f"{steps} steps, {took:.0f} s", flush=True)
    covered = sum(1 for b, _ in found if b and b[0] <= truth and (b[1] is None or truth <= b[1]))
    over = sum(1 for b, _ in found if b and b[0] > truth)
    widths = [(b[1] - b[0]) / (b[1] + b[0]) for b, _ in found if b and b[1]]
    print(f"bracket holds the truth in {covered} of {len(found)}, capacity over it in {over}, "
          f"half-width {statistics.median(widths) if widths else float('nan'):.1%} (median), "
          f"{statistics.median(s for _, s in found):g} steps (median); "
          f"{sum(1 for b, _ in found if not b)} found none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
