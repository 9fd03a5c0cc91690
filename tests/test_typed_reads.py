"""Typed all the way (issue 22): the engine's JSON is read by drive.LoadReport alone, and
experiments and trials leave the store as records, not rows."""

import re
from pathlib import Path

from stacklab.measure.drive import Bucket
from stacklab.store import (ExperimentRecord, ExperimentStatus, HeldTrial, Store,
                            TrialRecord)

from fakes import fake_load, load_report
from test_store import new_exp, record

PACKAGE = Path(__file__).resolve().parent.parent / "stacklab"
# Where the engine's report may be handled whole: read (drive), stored (store/records),
# written into the run's journal as one engine would (agents/pool's merged report) and
# exported as it is (report/export's JSON export).
WHOLE_REPORT = {"measure/drive.py", "store/records.py", "agents/pool.py", "report/export.py"}


def test_nothing_but_load_report_reads_the_engine_json():
    raw = re.compile(r"\.raw\b")
    readers = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
               if raw.search(p.read_text())}
    assert readers - WHOLE_REPORT == set()
    export = (PACKAGE / "report/export.py").read_text()
    assert [line.strip() for line in export.splitlines() if raw.search(line)] == [
        '"load": r.load.raw if r.load else None, "resources": r.resources.to_json(),']


def test_load_report_types_what_the_reports_read():
    doc = fake_load(1000.0, 16000, seed=1)
    doc["status_classes"]["5xx"] = 3
    doc["timeseries"] = [{"t_s": 0, "width_s": 2, "completed": 10, "errors": 1,
                          "p50_us": 5, "p99_us": 9, "bytes": 100}]
    load = load_report(doc)
    assert load.latency_us.p999 == doc["latency_us"]["p999"]
    assert load.status_classes == doc["status_classes"]
    assert load.timeseries == (Bucket(t_s=0, width_s=2, completed=10, errors=1, p99_us=9),)


def test_a_schema_1_bucket_is_one_second_wide():
    doc = fake_load(1000.0, 16000, seed=1, schema=1)
    doc["timeseries"] = [{"t_s": 3, "completed": 10, "errors": 0, "p50_us": 5,
                          "p99_us": 9, "bytes": 100}]
    assert load_report(doc).timeseries[0].width_s == 1


def test_experiments_and_trials_come_out_as_records(tmp_path):
    store = Store.open(tmp_path / "r.db")
    exp = new_exp(store)
    store.add_run(record(exp))
    got = store.experiment("e")
    assert got == ExperimentRecord(
        id=exp, name="e", spec_path="e.toml", spec_hash="h", spec={"experiment": {}},
        created_at="now", status=ExperimentStatus.RUNNING, stacklab_version="0.1.0",
        stacklab_commit=None, host={"cores": 2})
    store.set_status(exp, ExperimentStatus.COMPLETE)
    [listed] = store.experiments()
    assert (listed.status, listed.n_runs) == ("complete", 1)
    assert store.named("e") == [store.experiment(str(exp))]
    assert store.trials(exp) == [TrialRecord(experiment_id=exp, trial_id="abc123",
                                             position=0, label="nginx c=1",
                                             definition={"stack": "nginx"})]
    assert store.holding("abc") == [HeldTrial(experiment_id=exp, experiment="e",
                                              trial_id="abc123", label="nginx c=1")]
