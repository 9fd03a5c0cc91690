"""HTTP/2 through stacklab: load.protocol and load.streams to the engine, the servers'
http2 knob into their configs, a spec that cannot be spoken refused before any server
starts, and a run whose responses came in another protocol never measured as asked."""

import json
import tempfile
from pathlib import Path

import pytest

from stacklab.errors import SpecError
from stacklab.experiment.plan import make_plan
from stacklab.experiment.spec import parse_spec
from stacklab.measure.drive import LoadPlan, LoadReport, engine_argv
from stacklab.measure.verify import Status, check_protocol
from stacklab.stacks import REGISTRY, STACKS

from fakes import fake_load
from helpers import rendered_stack
from test_stacks import knobs_for


def plan_of(spec_args, load=None, knobs=None, stack=("nginx",), **axes):
    """The plan of a one-trial spec; `load` and `knobs` as the experiment file's sections
    would give them ("nginx.tls": True), `axes` extra matrix axes (load__protocol=[…])."""
    matrix = {"stack": list(stack), "workload": ["static-page"], "concurrency": [4]}
    for key, values in axes.items():
        if "__" in key:
            owner, name = key.split("__", 1)
            matrix.setdefault(owner, {})[name] = values
        else:
            matrix[key] = values
    sections = {}
    for key, value in (knobs or {}).items():
        owner, name = key.split(".", 1)
        sections.setdefault(owner, {})[name] = value
    doc = {"experiment": {"name": "h2", "repetitions": 1, "requests": 100},
           "load": load or {}, "knobs": sections, "matrix": matrix}
    return make_plan(parse_spec(doc, "h2.toml", *spec_args), STACKS)


# -- the engine's command line and report ---------------------------------------------------

def argv(**load):
    plan = LoadPlan((("http://127.0.0.1:8080/", 1),), 4, 1.0, None, 0.0,
                    {**REGISTRY.defaults("load"), **load})
    return engine_argv(plan, Path("/tmp/urls.txt"))


def test_the_engine_is_asked_for_http2_and_its_streams_only_when_the_load_says_so():
    assert "--protocol" not in argv() and "--streams" not in argv()
    got = argv(protocol="h2c", streams=8)
    at = got.index("--protocol")
    assert got[at:at + 4] == ["--protocol", "h2c", "--streams", "8"]


def report(schema=4, **top):
    doc = fake_load(1000, 500, seed=1, schema=schema)
    doc.update(top)
    return doc


def test_the_report_says_which_protocol_the_responses_came_in():
    assert LoadReport.from_json(report(protocol="h2c")).protocol == "h2c"
    assert LoadReport.from_json(report(schema=3)).protocol is None     # older reports
    tls = {"protocol": "TLSv1.3", "cipher": "x", "handshakes": 4, "resumed": 0,
           "alpn": "h2"}
    assert LoadReport.from_json(report(protocol="h2", tls=tls)).tls.alpn == "h2"


@pytest.mark.parametrize("asked, got, alpn, completed, status, said", [
    ("h2c", "h2c", None, 2000, Status.PASS, "came in h2c"),
    ("h2", "h2", "h2", 2000, Status.PASS, "came in h2 (the server chose 'h2' by ALPN)"),
    ("h2c", "http/1.1", None, 2000, Status.FAIL,
     "load.protocol = 'h2c' but the responses came in http/1.1"),
    ("h2", None, "http/1.1", 0, Status.FAIL,
     "load.protocol = 'h2' but no response came: the server chose 'http/1.1' by ALPN"),
    ("h2c", None, None, 0, Status.FAIL, "no response came in any protocol"),
])
def test_a_run_is_checked_for_the_protocol_it_asked(asked, got, alpn, completed, status,
                                                     said):
    tls = ({"protocol": "TLSv1.3", "cipher": "x", "handshakes": 4, "resumed": 0,
            "alpn": alpn} if alpn else None)
    doc = report(protocol=got, tls=tls)
    doc["requests"]["completed"] = completed
    verdict = check_protocol(asked, LoadReport.from_json(doc))
    assert verdict.status is status and said in verdict.detail
    assert verdict.data == {"asked": asked, "got": got, "alpn": alpn}


def test_an_http1_run_needs_no_protocol_check():
    assert check_protocol("http/1.1", LoadReport.from_json(report())) is None


def test_littles_law_counts_every_stream_as_a_client():
    """4 connections × 4 streams hold 16 requests in flight: at 1,000 req/s a mean of
    16 ms is what Little's law expects, not four times it."""
    from stacklab.analysis.flags import run_flags
    from stacklab.store.records import Resources
    def flags(streams):
        doc = fake_load(1000, 16_000, seed=1, config={"connections": 4, "streams": streams,
                                                       "protocol": "h2c"})
        return {f.name: f.detail for f in run_flags(LoadReport.from_json(doc), Resources())}
    assert "littles-law" not in flags(4)
    assert "4 connections / 1,000 req/s" in flags(1)["littles-law"]


def test_nginx_h2c_with_sendfile_is_flagged_known_slow_with_its_figures():
    from dataclasses import replace
    from stacklab.analysis.flags import run_flags
    from stacklab.stacks import known_slow
    from stacklab.store.records import Resources
    slow = known_slow(knobs_for("nginx", nginx__http2=True, load__protocol="h2c"))
    assert len(slow) == 1 and "sendfile" in slow[0] and "req/s" in slow[0]
    load = LoadReport.from_json(fake_load(1000, 200, seed=1))

    def flags(p99_us):
        held = replace(load, latency_us=replace(load.latency_us, p99=p99_us))
        return {f.name: f.detail for f in run_flags(held, Resources(), slow)}
    # 1% of the responses or more held as long as the stall (~44-48 ms measured)
    assert flags(20_000)["known-slow"] == f"{slow[0]} (this run's p99: 20.0 ms)"
    assert flags(48_000)["known-slow"].endswith("(this run's p99: 48.0 ms)")
    # the setting in a run not held by it (2 streams per connection: p99 0.51 ms measured)
    assert "known-slow" not in flags(19_999) and "known-slow" not in flags(None)
    for quick in (dict(nginx__http2=True, nginx__sendfile=False),           # h2c, no sendfile
                  dict(nginx__http2=True, nginx__tls=True), {}):             # h2, HTTP/1.1
        assert known_slow(knobs_for("nginx", load__protocol="h2c", **quick)) == ()
    # behind a layer an HTTP/1.1 load reaches nginx's unix socket, not its h2c port
    assert known_slow(knobs_for("nginx", nginx__http2=True)) == ()


def _stored(streams, p99_us, flags=()):
    """A run of nginx h2c with sendfile as the store holds it."""
    from dataclasses import replace
    from stacklab.store import Outcome, RunRecord
    from fakes import fake_resources
    load = LoadReport.from_json(fake_load(1000, 200, seed=1, config={
        "connections": 4, "streams": streams, "protocol": "h2c"}))
    load = replace(load, protocol="h2c", latency_us=replace(load.latency_us, p99=p99_us))
    return RunRecord(experiment_id=1, trial_id="t1", repetition=1, outcome=Outcome.OK,
                     started_at="", ended_at="", versions={}, configs={},
                     knobs=knobs_for("nginx", nginx__http2=True, load__protocol="h2c"),
                     load=load, resources=fake_resources("nginx", 1.0, 10.0),
                     flags=tuple(flags))


def test_show_says_the_streams_per_connection_in_the_singular_for_one():
    from stacklab.analysis.analyze import summarize
    from stacklab.report.text import protocol_line
    definition = {"stack": "nginx", "workload": "static-page", "concurrency": 4, "knobs": {}}
    one, two = (summarize(definition, "t", "t1", [_stored(m, 500)]) for m in (1, 2))
    assert protocol_line(one) == ("protocol t: responses in h2c (asked h2c), "
                                  "1 stream per connection")
    assert protocol_line(two).endswith(", 2 streams per connection")


def test_a_known_slow_flag_stored_under_the_older_rule_still_says_its_setting():
    """Runs stored before the p99 rule carry known-slow whatever their p99: the flag is
    theirs, and its detail says the setting, not an empty sentence."""
    from stacklab.analysis.analyze import summarize
    from stacklab.stacks import known_slow
    definition = {"stack": "nginx", "workload": "static-page", "concurrency": 4, "knobs": {}}
    setting = known_slow(knobs_for("nginx", nginx__http2=True, load__protocol="h2c"))[0]
    old = dict(summarize(definition, "t", "t1", [_stored(2, 500, ["known-slow"])]).flag_details)
    assert old["known-slow"] == f"1 of 1 runs; run 1: {setting}"
    held = dict(summarize(definition, "t", "t1", [_stored(1, 44_000, ["known-slow"])]).flag_details)
    assert held["known-slow"] == f"1 of 1 runs; run 1: {setting} (this run's p99: 44.0 ms)"


# -- spec errors: refused before any server starts, naming load.protocol ---------------------

@pytest.mark.parametrize("load, knobs, stack, said", [
    ({"protocol": "h2"}, {"nginx.http2": True, "nginx.tls": False}, "nginx",
     "HTTP/2 over TLS (ALPN) needs https URLs, and nginx.tls is off"),
    ({"protocol": "h2c"}, {"nginx.http2": True, "nginx.tls": True}, "nginx",
     "cleartext HTTP/2 (prior knowledge) needs http URLs, and nginx.tls is on"),
    ({"protocol": "h2"}, {"apache.tls": True, "apache.http2": False}, "apache",
     "apache.http2 is off: apache would answer HTTP/1.1"),
    ({}, {"nginx.http2": True}, "nginx", "takes cleartext HTTP/2 only (h2c, no HTTP/1.1)"),
    ({"protocol": "h2c", "keepalive": False}, {"nginx.http2": True}, "nginx",
     "HTTP/2 keeps its connections"),
    ({"protocol": "h2c"}, {}, "varnish > nginx", "varnish speaks HTTP/1.1 only here"),
])
def test_a_protocol_the_front_cannot_speak_is_refused(spec_args, load, knobs, stack, said):
    with pytest.raises(SpecError) as e:
        plan_of(spec_args, load, knobs, stack=(stack,))
    assert e.value.key == "load.protocol" and e.value.value == load.get("protocol",
                                                                          "http/1.1")
    assert said in e.value.problem and "(trial " in e.value.problem


def test_the_protocol_axis_is_named_where_it_is_given(spec_args):
    with pytest.raises(SpecError) as e:
        plan_of(spec_args, knobs={"nginx.http2": True, "nginx.tls": True},
                load={}, load__protocol=["h2", "h2c"])
    assert e.value.key == "matrix.load.protocol" and e.value.value == "h2c"


def test_axes_that_meet_where_no_protocol_can_be_spoken_get_the_exclude_that_would_do(
        spec_args):
    """Each refusal names the rule that leaves its combination out; with those rules the
    matrix plans. One axis alone gets no such rule (its value is what is wrong)."""
    import tomllib
    matrix = {"stack": ["nginx"], "workload": ["static-page"], "concurrency": [4],
              "load": {"protocol": ["http/1.1", "h2c"]}, "nginx": {"http2": [False, True]},
              "exclude": []}
    doc = {"experiment": {"name": "h2", "repetitions": 1, "requests": 100}, "matrix": matrix}
    for _ in range(2):
        with pytest.raises(SpecError) as e:
            make_plan(parse_spec(doc, "h2.toml", *spec_args), STACKS)
        rule = e.value.problem.split("; or leave such trials out: ")[1]
        assert rule.endswith(" in [matrix]")
        matrix["exclude"] += tomllib.loads(rule.removesuffix(" in [matrix]"))["exclude"]
    plan = make_plan(parse_spec(doc, "h2.toml", *spec_args), STACKS)
    assert sorted(t.label() for t in plan.trials) == [
        "nginx static-page c=4 load.protocol=h2c nginx.http2=True",
        "nginx static-page c=4 nginx.http2=False"]
    with pytest.raises(SpecError) as e:
        plan_of(spec_args, {"protocol": "h2c"}, {"nginx.http2": False}, stack=("nginx",))
    assert "exclude" not in e.value.problem


def test_a_protocol_brings_its_front_settings_where_the_spec_says_nothing_of_them(
        spec_args):
    """load.protocol = ["http/1.1", "h2", "h2c"] alone: each protocol's trials get the
    front's tls and http2 as the protocol needs them (only where they differ from the
    default), with no exclude rule to copy; a knob the spec sets stays as written."""
    doc = {"experiment": {"name": "h2", "repetitions": 1, "requests": 100},
           "matrix": {"stack": ["nginx", "apache"], "workload": ["static-page"],
                      "concurrency": [4], "load": {"protocol": ["http/1.1", "h2", "h2c"]}}}
    plan = make_plan(parse_spec(doc, "h2.toml", *spec_args), STACKS)
    assert sorted(t.label() for t in plan.trials) == [
        "apache static-page c=4",
        "apache static-page c=4 apache.http2=True apache.tls=True load.protocol=h2",
        "apache static-page c=4 apache.http2=True load.protocol=h2c",
        "nginx static-page c=4",
        "nginx static-page c=4 load.protocol=h2 nginx.http2=True nginx.tls=True",
        "nginx static-page c=4 load.protocol=h2c nginx.http2=True"]
    doc["matrix"]["load"]["protocol"] = ["h2"]
    doc["knobs"] = {"nginx": {"http2": False}}
    doc["matrix"]["stack"] = ["nginx"]
    with pytest.raises(SpecError) as e:                 # said by the spec: left as written
        make_plan(parse_spec(doc, "h2.toml", *spec_args), STACKS)
    assert "nginx.http2 is off" in e.value.problem


def test_apache_http2_under_prefork_is_refused_not_left_to_alpn(spec_args):
    with pytest.raises(SpecError) as e:
        plan_of(spec_args, {"protocol": "h2c"}, {"apache.http2": True},
                stack=("apache+mod_php",), workload=["php-page"])
    assert "mod_http2 does not support the prefork MPM" in e.value.problem
    # the spec never set apache.mpm: the error says where prefork came from
    assert e.value.problem.endswith("(stack apache+mod_php runs apache.mpm = 'prefork')")
    with pytest.raises(SpecError) as e:                 # set by the spec: nothing to add
        plan_of(spec_args, {"protocol": "h2c"}, {"apache.http2": True,
                                                 "apache.mpm": "prefork"}, stack=("apache",))
    assert "does not support the prefork MPM" in e.value.problem
    assert "(stack" not in e.value.problem
    from stacklab.stacks import COMPONENTS
    refused = COMPONENTS["apache"].check(knobs_for("apache", apache__http2=True,
                                                   apache__mpm="prefork")["apache"])
    assert "AH10034" in refused and "'event' or 'worker'" in refused


def test_lighttpd_speaks_http2_by_default_and_streams_need_it(spec_args):
    plan = plan_of(spec_args, {"protocol": "h2c", "streams": 4}, stack=("lighttpd",))
    assert dict(plan.trials[0].knobs)["load.streams"] == 4
    with pytest.raises(SpecError, match="load.streams.*acts only with load.protocol"):
        plan_of(spec_args, {"streams": 4}, stack=("lighttpd",))


# -- each server's config ---------------------------------------------------------------------

def config(stack, **overrides) -> str:
    base = Path(tempfile.mkdtemp(prefix="h2-"))
    return rendered_stack(base, stack, knobs_for(stack, **overrides))[0]


def test_nginx_listens_http2_and_keeps_an_http1_socket_for_its_checks_under_h2c():
    assert " http2" not in config("nginx")
    tls = config("nginx", nginx__http2=True, nginx__tls=True)
    assert "listen 127.0.0.1:8080 backlog=511 ssl http2;" in tls and "unix:" not in tls
    h2c = config("nginx", nginx__http2=True)
    assert "listen 127.0.0.1:8080 backlog=511 http2;" in h2c
    assert 'listen "unix:/LAB/RUN/nginx/http1.sock";' in h2c


def test_apache_loads_mod_http2_with_the_protocols_of_its_tls():
    assert "http2" not in config("apache")
    tls = config("apache", apache__http2=True, apache__tls=True)
    assert "LoadModule http2_module /usr/lib/apache2/modules/mod_http2.so" in tls
    assert "Protocols h2 http/1.1\n" in tls and "H2Direct" not in tls
    h2c = config("apache", apache__http2=True)
    assert "Protocols h2c http/1.1\nH2Direct on\n" in h2c


def test_lighttpd_sets_its_http2_feature_flags():
    on = '"server.h2proto" => "enable", "server.h2c" => "enable"'
    assert on in config("lighttpd")
    assert '"server.h2proto" => "disable"' in config("lighttpd", lighttpd__http2=False)


# -- real runs through `stacklab run` ---------------------------------------------------------

RUN = """
[experiment]
remeasure = 0
name = "h2-{name}"
repetitions = 1
duration = "1s"
warmup = "0s"

[load]
protocol = "{protocol}"
streams = 2

[knobs]
{knobs}

[matrix]
stack = ["{stack}"]
workload = ["static-page"]
concurrency = [4]
"""


@pytest.mark.integration
@pytest.mark.parametrize("stack, protocol, knobs", [
    ("nginx", "h2c", {"nginx.http2": True}),
    ("nginx", "h2", {"nginx.http2": True, "nginx.tls": True}),
    ("apache", "h2", {"apache.http2": True, "apache.tls": True}),
    ("apache", "h2c", {"apache.http2": True}),
    ("lighttpd", "h2c", {}),                          # lighttpd's own default: on
])
def test_a_real_run_is_stored_with_the_protocol_it_came_in(tmp_path, stack, protocol, knobs):
    from typer.testing import CliRunner
    from stacklab.cli import cli
    from stacklab.store import Outcome, Store
    from helpers import require_engine
    require_engine()
    spec, db = tmp_path / "h2.toml", tmp_path / "r.db"
    spec.write_text(RUN.format(name=stack, protocol=protocol, stack=stack, knobs="\n".join(
        f"{k} = {json.dumps(v)}" for k, v in knobs.items())))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    store = Store.open(db, readonly=True)
    [run] = store.runs(store.experiment().id)
    assert run.outcome is Outcome.OK, run.reason
    assert run.load.protocol == protocol and run.load.asked_protocol == protocol
    assert run.load.completed > 0 and run.load.streams == 2
    checked = {v.check: v for v in run.verdicts}
    assert checked["protocol"].status is Status.PASS
    assert checked["http2"].status is Status.PASS
    # nginx's h2c port with sendfile on (Debian's default) stalls a connection's lone
    # stream only: with 2 streams each, not held, not flagged
    assert "known-slow" not in run.flags, run.flags
    # and said: by show, and by show --json
    assert f"responses in {protocol} (asked {protocol}), 2 streams per connection" in " ".join(
        result.output.split())
    shown = CliRunner().invoke(cli, ["show", "--db", str(db), "--json"])
    assert json.loads(shown.output)["trials"][0]["protocol"] == {
        "asked": [protocol], "spoken": [protocol], "streams": [2]}


@pytest.mark.integration
def test_front_layers_reach_an_h2c_nginx_by_its_http1_socket(tmp_path):
    """nginx with http2 on and tls off takes h2c only on its port; the layers in front of
    it (varnish, haproxy, nginx-proxy, apache-proxy) reach its HTTP/1.1 unix socket, and
    a real HTTP/1.1 load through each is served and verified."""
    from typer.testing import CliRunner
    from stacklab.cli import cli
    from stacklab.store import Outcome, Store
    from helpers import require_engine
    require_engine()
    spec = tmp_path / "layers.toml"
    spec.write_text(RUN.format(name="layers", protocol="http/1.1", stack="nginx",
                               knobs="nginx.http2 = true")
                    .replace("streams = 2\n", "")
                    .replace('stack = ["nginx"]', 'stack = ["varnish > nginx", "haproxy > nginx", '
                             '"nginx-proxy > nginx", "apache-proxy > nginx"]'))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 0, result.output
    store = Store.open(tmp_path / "r.db", readonly=True)
    runs = list(store.runs(store.experiment().id))
    assert len(runs) == 4
    for run in runs:
        assert run.outcome is Outcome.OK, (run.knobs, run.reason)
        assert run.load.completed > 0 and run.load.protocol == "http/1.1"
        assert run.knobs["nginx"]["http2"] is True


@pytest.mark.integration
def test_nginx_h2c_with_sendfile_holding_a_lone_stream_is_flagged_known_slow(tmp_path):
    """One stream per connection on nginx's h2c port with sendfile on (Debian's default):
    each response is held ~44-48 ms, and the run says so; with sendfile off it is not."""
    from typer.testing import CliRunner
    from stacklab.cli import cli
    from stacklab.store import Store
    from helpers import require_engine
    require_engine()
    spec = tmp_path / "h2c.toml"
    spec.write_text(RUN.format(name="stall", protocol="h2c", stack="nginx",
                               knobs="nginx.http2 = true")
                    .replace("streams = 2", "streams = 1")
                    .replace("[matrix]", '[matrix]\nnginx.sendfile = [true, false]'))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 0, result.output
    store = Store.open(tmp_path / "r.db", readonly=True)
    runs = {r.knobs["nginx"]["sendfile"]: r for r in store.runs(store.experiment().id)}
    held, quick = runs[True], runs[False]
    assert held.load.latency_us.p50 >= 20_000 and "known-slow" in held.flags, held.flags
    assert quick.load.latency_us.p99 < 5_000 and "known-slow" not in quick.flags


@pytest.mark.integration
def test_an_h2_run_the_server_answers_by_alpn_with_http1_is_failed_naming_both(
        tmp_path, monkeypatch):
    """Through the orchestrator as it runs: a server that chose http/1.1 by ALPN (the
    fake engine, FAKE_ENGINE_ALPN, as the real one reports it) completes nothing; the run
    is failed, its reason names the protocol asked and what came back, and the protocol
    verdict FAILs."""
    from typer.testing import CliRunner
    from stacklab.cli import cli
    from stacklab.store import Outcome, Store
    from fakes import use_fake_engine
    use_fake_engine(monkeypatch, tmp_path / "log")
    monkeypatch.setenv("FAKE_ENGINE_ALPN", "http/1.1")
    spec, db = tmp_path / "h2.toml", tmp_path / "r.db"
    spec.write_text(RUN.format(name="alpn", protocol="h2", stack="nginx",
                               knobs="nginx.http2 = true\nnginx.tls = true"))
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    store = Store.open(db, readonly=True)
    [run] = store.runs(store.experiment().id)
    assert run.outcome is Outcome.FAILED, result.output
    assert run.reason.startswith("no request completed (")
    assert ("load.protocol = 'h2' but no response came: the server chose 'http/1.1' by "
            "ALPN") in run.reason
    assert {v.check: v.status for v in run.verdicts}["protocol"] is Status.FAIL


@pytest.mark.parametrize("handshakes, said", [
    (400, "400 handshakes, 3 resumed"),
    (0, "no handshake while measured (the connections were opened in warm-up and kept)")])
def test_show_says_a_tls_run_whose_connections_all_came_from_warm_up(handshakes, said):
    from types import SimpleNamespace
    from stacklab.report.text import tls_line
    s = SimpleNamespace(label="t", tls={"protocols": ["TLSv1.3"], "ciphers": ["AES"],
                                        "handshakes": handshakes, "resumed": 3})
    assert tls_line(s) == f"TLS t: TLSv1.3 AES, {said}"
