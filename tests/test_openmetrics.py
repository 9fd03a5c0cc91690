"""The OpenMetrics export, read back by a real OpenMetrics parser (prometheus_client's):
every family has the type it says, and the values are the stored summaries' in base
units; a knob value with a quote, a backslash and a newline comes back whole."""

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from typer.testing import CliRunner

from stacklab.analysis.analyze import load_view
from stacklab.cli import cli
from stacklab.report.openmetrics import (escape_label_value, knob_labels, label_name,
                                         number)
from stacklab.store import Store

from fakes import fake_experiment
from test_export import AWKWARD, knobbed_experiment

TYPES = {"stacklab_requests_per_second": "gauge", "stacklab_latency_seconds": "summary",
         "stacklab_transfer_bytes_per_second": "gauge", "stacklab_errors": "counter",
         "stacklab_server_cpu_per_request_seconds": "gauge",
         "stacklab_memory_rss_peak_bytes": "gauge",
         "stacklab_memory_rss_idle_bytes": "gauge", "stacklab_runs": "gauge"}


def exported(db, name: str) -> str:
    result = CliRunner().invoke(cli, ["export", name, "--format", "openmetrics",
                                      "--db", str(db)])
    assert result.exit_code == 0, result.output
    return result.output


def parsed(db, name: str) -> dict:
    """name → family, as the parser reads them (it raises on what the format forbids)."""
    return {f.name: f for f in text_string_to_metric_families(exported(db, name))}


def summaries(db, name: str) -> dict:
    store = Store.open(db, readonly=True)
    try:
        return {s.trial_id: s for s in load_view(store, name).summaries}
    finally:
        store.close()


def samples(family, name: str | None = None, **labels) -> dict:
    """trial_id → value of `family`'s samples called `name` with `labels`."""
    name = name or family.name
    return {s.labels["trial_id"]: s.value for s in family.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())}


def test_the_values_are_the_stored_summaries(tmp_path):
    fake_experiment(tmp_path / "r.db")
    families = parsed(tmp_path / "r.db", "fixed")
    assert {n: f.type for n, f in families.items()} == TYPES
    assert families["stacklab_latency_seconds"].unit == "seconds"
    assert families["stacklab_memory_rss_peak_bytes"].unit == "bytes"
    stored = summaries(tmp_path / "r.db", "fixed")
    assert samples(families["stacklab_requests_per_second"]) == {
        t: s.rps.median for t, s in stored.items()}
    latency = families["stacklab_latency_seconds"]
    for q, key in (("0.5", "p50"), ("0.99", "p99"), ("0.999", "p999")):
        assert samples(latency, quantile=q) == pytest.approx(
            {t: s.latency_us[key] / 1e6 for t, s in stored.items()}, rel=1e-12)
    assert samples(latency, "stacklab_latency_seconds_count") == {
        t: s.latency_us["count"] for t, s in stored.items()}
    assert samples(families["stacklab_transfer_bytes_per_second"]) == pytest.approx(
        {t: s.mbps.median * 1e6 for t, s in stored.items()})
    cpu = families["stacklab_server_cpu_per_request_seconds"]
    assert {(x.labels["trial_id"], x.labels["component"]): x.value for x in cpu.samples} \
        == pytest.approx({(t, s.stack): s.cpu_us_per_request[s.stack].median / 1e6
                          for t, s in stored.items()})
    assert samples(families["stacklab_runs"], outcome="ok") == {t: 3 for t in stored}
    for s in families["stacklab_requests_per_second"].samples:
        trial = stored[s.labels["trial_id"]]
        assert s.labels == {"experiment": "fixed", "experiment_id": "1",
                            "trial_id": trial.trial_id, "stack": trial.stack,
                            "workload": "static-page",
                            "concurrency": str(trial.concurrency),
                            "knob_load_keepalive": "true"}


def test_knobs_are_labels_and_an_awkward_value_round_trips(tmp_path):
    """`nginx.root` holds a quote, a backslash and a newline; errors by class are the
    stored runs' sums; an invalid run is counted, not measured."""
    knobbed_experiment(tmp_path / "k.db")
    text = exported(tmp_path / "k.db", "knobbed")
    assert text.endswith("\n# EOF\n")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    rps = {s.labels["trial_id"]: s.labels for s in
           families["stacklab_requests_per_second"].samples}
    assert rps["t0"]["knob_nginx_root"] == AWKWARD
    assert rps["t0"]["knob_nginx_worker_processes"] == "1"
    assert "knob_nginx_worker_processes" not in rps["t1"]
    assert (rps["t2"]["knob_apache_mpm"], rps["t2"]["knob_load_keepalive"]) == (
        "event", "false")
    errors = families["stacklab_errors"]
    assert samples(errors, "stacklab_errors_total", **{"class": "timeout"}) == {
        "t0": 6, "t1": 0, "t2": 0}
    assert samples(errors, "stacklab_errors_total", **{"class": "read"})["t0"] == 4
    assert samples(families["stacklab_runs"], outcome="invalid") == {"t0": 0, "t1": 0,
                                                                      "t2": 1}
    stored = summaries(tmp_path / "k.db", "knobbed")
    assert samples(families["stacklab_latency_seconds"], quantile="0.99") == pytest.approx(
        {t: s.latency_us["p99"] / 1e6 for t, s in stored.items()}, rel=1e-12)


@pytest.mark.parametrize("knob, label", [
    ("nginx.worker_processes", "knob_nginx_worker_processes"),
    ("php-fpm.pm.max_children", "knob_php_fpm_pm_max_children"),
    ("9p.é", "knob_9p__"),
])
def test_label_names_are_sanitised(knob, label):
    assert label_name(knob) == label


def test_knobs_that_sanitise_alike_get_distinct_labels():
    assert knob_labels(["a.b", "a-b", "a_b"]) == {"a.b": "knob_a_b", "a-b": "knob_a_b_2",
                                                  "a_b": "knob_a_b_3"}


@pytest.mark.parametrize("value, text", [
    ('a"b', r'a\"b'), ("a\\b", r"a\\b"), ("a\nb", r"a\nb"), ("\\n", r"\\n")])
def test_label_values_are_escaped(value, text):
    assert escape_label_value(value) == text


@pytest.mark.parametrize("value, text", [
    (3, "3"), (0.5, "0.5"), (1.2e-05, "1.2e-05"), (float("inf"), "+Inf"),
    (float("-inf"), "-Inf"), (float("nan"), "NaN")])
def test_numbers(value, text):
    assert number(value) == text
