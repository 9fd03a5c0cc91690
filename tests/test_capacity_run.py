"""`stacklab capacity` end to end: calibrated against a server whose capacity is known by
construction, then on real nginx.

The calibration server has K workers and a fixed service time: each request is given
the worker free soonest and holds it for SERVICE_S from the moment it is free (on the
server's clock, so that a late wake-up delays that answer but never the worker's next
one), so at most K / SERVICE_S requests a second are served, and the engine's evenly
paced arrivals below that rate never queue. Above it the queue grows by the excess every second, so the latency of a
step 2% over the limit climbs past the SLO (2 × the service time) within its length:
the limit is a sharp edge the search must find within 5% under it and never over it,
in at most 8 steps (just under the edge the engine's own jitter queues requests
a while, and a confirmation step there may count them as correlated: see
analysis/capacity.per_draw). It is
reached as the user's own server is: through [external], at a loopback URL."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.store import Outcome, Store

from helpers import BodyHandler, require_engine, serving

K, SERVICE_S = 8, 0.010
KNOWN = K / SERVICE_S          # 800 req/s
BODY = b"k" * 200


class KnownServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self):
        super().__init__(("127.0.0.1", 0), BodyHandler)
        self.body = BODY
        self.lock = threading.Lock()
        self.free_at = [0.0] * K          # when each worker is next free (monotonic s)

    def done_at(self) -> float:
        """The worker free soonest takes the request; when it will have served it."""
        with self.lock:
            worker = min(range(K), key=self.free_at.__getitem__)
            start = max(time.monotonic(), self.free_at[worker])
            self.free_at[worker] = start + SERVICE_S
            return start + SERVICE_S

    def delay_s(self) -> float:
        return max(0.0, self.done_at() - time.monotonic())


@pytest.fixture
def known_server():
    with serving(KnownServer()) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/"


def invoke(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def searches(db: Path, name: str) -> list:
    store = Store.open(db)
    try:
        return list(store.runs(store.experiment(name).id))
    finally:
        store.close()


@pytest.mark.integration
def test_the_search_finds_a_known_capacity(tmp_path, known_server):
    require_engine()
    spec = tmp_path / "known.toml"
    spec.write_text(f"""
[experiment]
name = "known"
duration = "3s"
warmup = "0.5s"
remeasure = 0

[capacity]
slo = "p99<20ms"
step = "1s"
resolution = 0.01

[external]
url = "{known_server}"
paths = ["/"]

[matrix]
concurrency = [32]
""")
    db = tmp_path / "r.db"
    status, out = invoke("capacity", spec, "--repetitions", "1", "--db", db)
    assert status == 0, out
    [run] = searches(db, "known")
    assert run.outcome is Outcome.OK, run.reason
    found = run.resources.part("capacity")
    steps = [s for s in found["steps"] if s["phase"] == "search"]
    decided = [s for s in steps if "measured again" not in s["reason"]]
    for s in found["steps"]:         # shown whole when the test fails (pytest cuts lists)
        print(s["phase"], s["rate"], s["duration_s"], s["decision"], s["reason"], s["flags"])
    assert found["confirmed"] and 0.95 * KNOWN <= found["capacity"] <= KNOWN, [
        (s["phase"], s["rate"], s["decision"], s["reason"], s["flags"]) for s in found["steps"]]
    assert len(decided) <= 8, [(s["rate"], s["decision"], s["reason"], s["flags"]) for s in steps]
    # every step is stored with what decided it; the run's load is the confirmation's
    assert all(s["decision"] in ("pass", "fail", "longer") and s["reason"] for s in steps)
    assert run.load.rate == round(found["capacity"])
    assert "capacity: the highest open-loop rate whose p99<20ms held" in out


@pytest.mark.integration
def test_capacity_of_real_nginx_is_found_confirmed_and_reported(tmp_path):
    require_engine()
    spec = tmp_path / "nginx.toml"
    spec.write_text("""
[experiment]
name = "cap"
duration = "2s"
warmup = "0.5s"
repetitions = 2

[load]
keepalive = true

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [1, 16]
""")
    db = tmp_path / "r.db"
    html = tmp_path / "capacity.html"
    status, out = invoke("capacity", spec, "--slo", "p99<20ms", "--step", "1s",
                         "--repetitions", "1", "--db", db, "-o", html)
    assert status == 0, out
    assert "latency against offered rate" in html.read_text().lower()
    run = searches(db, "cap.capacity")[-1]     # a run disturbed by the host is made again
    found = run.resources.part("capacity")
    assert found["connections"] == 16            # the spec's largest concurrency
    for s in found["steps"]:         # shown whole when the test fails (pytest cuts lists)
        print(s["phase"], s["rate"], s["duration_s"], s["decision"], s["reason"], s["flags"])
    assert found["capacity"] and found["confirmed"], found["stopped"]
    phases = [s["phase"] for s in found["steps"]]
    assert phases[0] == "probe" and phases[-3:] == ["profile"] * 3 and "confirm" in phases
    assert run.load.rate == round(found["capacity"])     # the run's load: the confirmation
    # one search, or more where the host had one made again
    assert "nginx static-page:" in out and "req/s (" in out
    shown_status, shown = invoke("show", "cap.capacity", "--db", db)
    assert shown_status == 0 and "capacity: the highest open-loop rate" in shown


@pytest.mark.parametrize("args, said", [
    (["--slo", "p99<50"], "--slo 'p99<50'"),
    (["--slo", "p99<50ms", "--max-error-rate", "2"], "--max-error-rate '2'"),
    (["--slo", "p99<50ms", "--step", "0.5s"], "--step '0.5s'"),
    (["--slo", "p99<50ms", "--connections", "0"], "--connections 0"),
    ([], "--slo: missing"),
    (["--slo", "p99<50ms", "-o", "/nonexistent/r.html"], "-o /nonexistent/r.html"),
])
def test_bad_flags_are_named(tmp_path, args, said):
    spec = tmp_path / "s.toml"
    spec.write_text('[experiment]\nname = "s"\nduration = "2s"\n[matrix]\n'
                    'stack = ["nginx"]\nworkload = ["static-page"]\nconcurrency = [4]\n')
    status, out = invoke("capacity", spec, *args, "--dry-run")
    assert status != 0 and said in out, out


def test_a_capacity_spec_refuses_what_the_search_sets(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[experiment]\nname = "s"\nrequests = 100\n[capacity]\nslo = "p99<5ms"\n'
                    '[matrix]\nstack = ["nginx"]\nworkload = ["static-page"]\n'
                    'concurrency = [4]\n')
    status, out = invoke("run", spec, "--dry-run")
    assert status != 0 and "experiment.requests" in out and "duration" in out, out
    spec.write_text('[experiment]\nname = "s"\nduration = "2s"\n[capacity]\n'
                    'slo = "p99<5ms"\n[load]\nrate = 100\n[matrix]\nstack = ["nginx"]\n'
                    'workload = ["static-page"]\nconcurrency = [4]\n')
    status, out = invoke("run", spec, "--dry-run")
    assert status != 0 and "load.rate" in out, out


def _answered(rps: float, ttfb_us: float, p99_us: float | None = None):
    from stacklab.measure.drive import Latency

    from fakes import fake_report
    load = fake_report(rps, ttfb_us, seed=1)
    return replace(load, ttfb_us=Latency(p50=ttfb_us, p90=ttfb_us, p99=p99_us or ttfb_us,
                                         max=p99_us or ttfb_us, mean=ttfb_us))


@pytest.mark.parametrize("rps, connections, p99_us, light_us, bound", [
    (790.0, 8, None, 9_000.0, True),       # 8 connections / 10 ms = 800 req/s < 1000
    (990.0, 16, None, 9_000.0, False),     # the rate was kept, the slots 62% busy
    (990.0, 11, None, 9_000.0, True),      # kept, but the slots 91% busy: requests
                                           # queued at the client for a free one
    (790.0, 32, None, 9_000.0, False),     # 32 connections could carry 3,200
    (790.0, 8, 60_000.0, 9_000.0, False),  # the server answered past the limit
    (790.0, 8, None, 2_000.0, False),      # answers 5× slower than under light load:
                                           # the server's queue, its capacity
    (790.0, 8, None, None, False),         # no light-load figure to judge by
])
def test_connections_bound_is_the_clients_limit_only(rps, connections, p99_us, light_us,
                                                      bound):
    from stacklab.run.capacity import connections_bound
    load = _answered(rps, 10_000.0, p99_us)
    assert connections_bound(load, connections, 1000.0, 50_000.0, light_us) is bound


def test_show_says_each_trials_capacity_from_stored_searches(tmp_path):
    from fakes import fake_experiment
    db = tmp_path / "r.db"
    fake_experiment(db, name="fixed", flag_apache_256=False, capacity=0.8)
    status, out = invoke("show", "fixed", "--db", db)
    assert status == 0, out
    text = " ".join(out.split())
    assert ("capacity: the highest open-loop rate whose p99<50ms held, with errors at most "
            "0.00%, at 16 connections") in text
    # nginx at c=1: 20,200 req/s × 0.8 in the 3 runs' 1% steps around it
    assert "nginx static-page c=1: 16,160 req/s (range 15,998–16,322)" in text, text
    # the fakes store only the confirmation: no profile steps
    assert "p50 / p99 at 50%: —, 80%: —, 90%: —, 100%: 0.90 / 20.00 ms" in text, text
    assert "3 search(es), 2–2 steps each, ended: resolved" in text


def test_show_json_carries_each_trials_capacity(tmp_path):
    import json

    import jsonschema

    from fakes import fake_experiment
    from helpers import ROOT
    db = tmp_path / "r.db"
    fake_experiment(db, name="fixed", flag_apache_256=False, capacity=0.8)
    status, out = invoke("show", "fixed", "--db", db, "--json")
    doc = json.loads(out)
    schema = json.loads((ROOT / "stacklab/report/schemas/show.schema.json").read_text())
    jsonschema.validate(doc, schema)
    nginx = next(t for t in doc["trials"] if t["label"] == "nginx static-page c=1")
    assert nginx["capacity"]["median"] == pytest.approx(16_160)
    assert nginx["capacity"]["interval_kind"] == "range"


class FakeMeasures:
    """The run's measurement for a server of known behaviour, no engine: `kept(rate,
    duration_s)` says whether it keeps a rate for that long (latency 1 ms if it does;
    else it serves its limit with 200 ms answers)."""

    def __init__(self, kept, limit: float = 1000.0):
        self.kept, self.limit, self.plans = kept, limit, []

    def plan(self):
        from stacklab.measure.drive import LoadPlan
        return LoadPlan(urls=(("http://127.0.0.1:1/", 1),), connections=64, duration_s=3.0,
                        requests=None, warmup_s=0.0, load={"rate": 0})

    def landed(self):
        return lambda load: None

    def measured(self, plan, settled, landed=None):
        from fakes import fake_report, fake_resources
        self.plans.append(plan)
        rate, d = plan.load["rate"], plan.duration_s
        ok = not rate or self.kept(rate, d)
        rps = self.limit if not rate else (rate if ok else self.limit)
        load = fake_report(rps, 1_000.0 if ok else 200_000.0, seed=len(self.plans),
                           duration_s=d, engine_cpu_s=0.01,
                           config={"rate": rate or None, "threads": 1, "connections": 64})
        return load, fake_resources("nginx", 0.01 * d, 10.0)


def searched(kept, **goal):
    from stacklab.experiment.spec import Capacity
    from stacklab.run.capacity import CapacitySearch
    from stacklab.run.quiet import Settled
    fake = FakeMeasures(kept)
    layer = CapacitySearch(fake, Capacity(slo="p99<50ms", step=1.0, **goal), 0.5)
    final, record = layer._search(fake.plan(), Settled(0.0, True, None))
    return fake, final, record


def test_the_search_against_a_fake_server_of_known_capacity():
    fake, final, record = searched(lambda rate, d: rate <= 1000, resolution=0.01)
    assert record["confirmed"] and 990 <= record["capacity"] <= 1000, record
    assert final.load.rate == record["capacity"]
    assert [s["phase"] for s in record["steps"]][-3:] == ["profile"] * 3
    # every step offered a whole number of requests a second, and was judged on it
    assert all(isinstance(s["rate"], int) for s in record["steps"] if s["rate"])


def test_a_busy_host_costs_a_search_at_most_its_budget_of_steps_measured_again():
    """Issue 40: beside other work every failed step was measured again, twice (71
    steps in one trial); a search now measures again REMEASURES steps at most, and the
    dry run's longest time holds its steps."""
    from stacklab.experiment.spec import REMEASURES, Capacity

    class Busy(FakeMeasures):
        def measured(self, plan, settled, landed=None):
            load, resources = super().measured(plan, settled, landed)
            return load, {**resources, "_host": {"outside_cores": 1.5, "lab_cores": 0.5,
                                                 "steal_share": 0.0, "cpus": 2,
                                                 "tolerance_cores": 0.0}}
    from stacklab.run.capacity import CapacitySearch
    from stacklab.run.quiet import Settled
    fake = Busy(lambda rate, d: rate <= 1000)
    goal = Capacity(slo="p99<50ms", step=1.0)
    layer = CapacitySearch(fake, goal, 0.5)
    _, record = layer._search(fake.plan(), Settled(0.0, True, None))
    again = [s for s in record["steps"] if "measured again" in s["reason"]]
    assert 0 < len(again) <= REMEASURES, [(s["phase"], s["reason"]) for s in again]
    searching = [s for s in record["steps"] if s["phase"] != "confirm"]
    assert sum(s["duration_s"] + 0.5 for s in searching) <= goal.most_s(0.0, 0.5)


def test_a_rate_that_passed_a_short_step_by_luck_is_not_confirmed_at_full_length():
    """Short steps pass up to 1,100 req/s, full-length ones only up to 1,000: the
    confirmation steps down and bisects at full length to what holds."""
    fake, final, record = searched(lambda rate, d: rate <= (1100 if d < 2 else 1000))
    assert record["searched"] > 1000 and record["confirmed"], record
    assert 920 <= record["capacity"] <= 1000, record
    confirms = [s for s in record["steps"] if s["phase"] == "confirm"]
    assert confirms[0]["decision"] == "fail" and confirms[-1]["decision"] == "pass"
    assert len(confirms) <= 8
    # the rate that held passed twice at full length, each on its own step
    held = [s for s in confirms if s["rate"] == record["capacity"]]
    assert [s["decision"] for s in held] == ["pass", "pass"], confirms


def test_a_rate_that_passes_a_full_length_step_once_by_luck_does_not_hold():
    """A server that keeps 1,000 req/s but passes 1,050 once at full length (its first
    try, by luck): the second step at 1,050 fails, so 1,050 is no capacity."""
    tries: dict[int, int] = {}

    def kept(rate, d):
        if d < 2:
            return rate <= 1100
        tries[rate] = tries.get(rate, 0) + 1
        return rate <= 1000 or (rate <= 1100 and tries[rate] == 1)
    fake, final, record = searched(kept)
    assert record["confirmed"] and record["capacity"] <= 1000, record


def test_connections_bound_counts_each_http2_stream_as_a_slot():
    """2 connections of 8 streams are 16 slots: at 10 ms answers they carry 1,600 req/s,
    so a step of 1,000 that lost rate lost it to the server, not to them."""
    from stacklab.run.capacity import connections_bound
    load = replace(_answered(790.0, 10_000.0, None), streams=8)
    assert connections_bound(load, 2, 1000.0, 50_000.0, 9_000.0) is False
    assert connections_bound(replace(load, streams=1), 2, 1000.0, 50_000.0, 9_000.0)
