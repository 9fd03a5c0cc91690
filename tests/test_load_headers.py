"""Request headers as load knobs: load.headers (literal, as wrk -H) and load.conditional
(the server's own validator sent back, S4's 304). Spec errors name the entry at fault;
the engine gets each header as one argv element; and on real servers a conditional GET
answered 304 is a PASS measured small, one that is not a FAIL measured not at all."""

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.measure.drive import LoadPlan, engine_argv
from stacklab.errors import EngineError, SpecError
from stacklab.experiment.plan import make_plan
from stacklab.experiment.spec import parse_spec
from stacklab.stacks import REGISTRY, STACKS

from helpers import require_engine, server_processes

DOC = {"experiment": {"name": "t", "repetitions": 1, "duration": "1s"},
       "load": {"keepalive": False},
       "matrix": {"stack": ["nginx", "apache+mod_php"], "workload": ["static-page"],
                  "concurrency": [4]}}


def parse(spec_args, load=None, matrix=None):
    doc = {**DOC, "load": {**DOC["load"], **(load or {})},
           "matrix": {**DOC["matrix"], **(matrix or {})}}
    return parse_spec(doc, "h.toml", *spec_args)


# spec ----------------------------------------------------------------------------------

@pytest.mark.parametrize("headers, key, value, fragment", [
    (["X-A: 1", "X-B: 2\r\nX-C: 3"], "load.headers[1]", "X-B: 2\r\nX-C: 3",
     "contains '\\r': a line break or NUL would end the header there"),
    (["X-A: 1\n"], "load.headers[0]", "X-A: 1\n", "contains '\\n'"),
    (["X-A: a\0b"], "load.headers[0]", "X-A: a\0b", "contains '\\x00'"),
    (["Host: example.org"], "load.headers[0]", "Host: example.org",
     "Host may not be set: the engine sends the URL's own Host"),
    (["content-length: 5"], "load.headers[0]", "content-length: 5",
     "content-length may not be set: a GET here has no body"),
    (["Transfer-Encoding: chunked"], "load.headers[0]", "Transfer-Encoding: chunked",
     "read the next request as this one's body"),
    (["Connection: close"], "load.headers[0]", "Connection: close",
     "connection reuse is load.keepalive"),
    (["X Y: 1"], "load.headers[0]", "X Y: 1", "header name 'X Y' is not an HTTP token"),
    ([": 1"], "load.headers[0]", ": 1", "header name '' is not an HTTP token"),
    (["If-None-Match"], "load.headers[0]", "If-None-Match", "no colon"),
    (["X-A: caf\u00e9"], "load.headers[0]", "X-A: caf\u00e9", "non-ASCII"),
    ([5], "load.headers[0]", 5, "expected a string 'Name: value'"),
])
def test_a_bad_header_is_one_spec_error_naming_the_entry(spec_args, headers, key, value,
                                                         fragment):
    with pytest.raises(SpecError) as e:
        parse(spec_args, {"headers": headers})
    assert (e.value.file, e.value.key, e.value.value) == ("h.toml", key, value)
    assert fragment in e.value.problem
    assert str(e.value).startswith(f"h.toml: {key} = ")
    assert "\r" not in str(e.value) and "\n" not in str(e.value)    # one printable line


@pytest.mark.parametrize("load, key, fragment", [
    ({"headers": "X-A: 1"}, "load.headers", "takes a list"),
    ({"headers": [f"X-{i}: 1" for i in range(33)]}, "load.headers", "at most 32 headers"),
    ({"conditional": "yes"}, "load.conditional", "one of none, etag, last-modified"),
])
def test_bad_header_knob_values_are_refused_whole(spec_args, load, key, fragment):
    with pytest.raises(SpecError) as e:
        parse(spec_args, load)
    assert e.value.key == key and fragment in e.value.problem


def test_a_literal_condition_beside_load_conditional_is_refused(spec_args):
    spec = parse(spec_args, {"headers": ['If-None-Match: "x"']},
                 {"load": {"conditional": ["none", "etag"]}})
    with pytest.raises(SpecError) as e:
        make_plan(spec, STACKS)
    assert (e.value.key, e.value.value) == ("matrix.load.conditional", "etag")
    assert "load.headers already sends If-None-Match" in e.value.problem


def test_trials_without_the_new_knobs_keep_their_ids(spec_args):
    """Ids pinned from the code before these knobs existed; the labels say the spec's
    load.keepalive = false, as they say any load knob away from its default."""
    trials = make_plan(parse(spec_args), STACKS).trials
    assert [(t.label(), t.id) for t in trials] == [
        ("nginx static-page c=4 load.keepalive=False", "38c44ca14cfb"),
        ("apache+mod_php static-page c=4 load.keepalive=False", "eca609e68bb7")]


def test_a_conditional_axis_is_in_the_label_but_none_is_not(spec_args):
    """(like any load knob: said away from its default)"""
    trials = make_plan(parse(spec_args, matrix={
        "stack": ["nginx"], "load": {"conditional": ["none", "etag"]}}), STACKS).trials
    assert [t.label() for t in trials] == [
        "nginx static-page c=4 load.keepalive=False",
        "nginx static-page c=4 load.conditional=etag load.keepalive=False"]


# argv ----------------------------------------------------------------------------------

def plan(load=None, headers=()):
    knobs = {**REGISTRY.defaults("load"), **(load or {})}
    return LoadPlan((("http://127.0.0.1:8080/", 1),), 4, 1.0, None, 0.0, knobs,
                    headers=headers)


def test_each_header_is_one_argv_element_after_the_engine_flags():
    argv = engine_argv(plan({"headers": ['If-None-Match: "a b"', "X-Dash: -n 5"]}),
                       Path("u.txt"))
    assert argv[-2:] == ['--header=If-None-Match: "a b"', "--header=X-Dash: -n 5"]
    assert "-H" not in argv and "-n" not in argv        # a value is never a flag


def test_a_resolved_condition_is_sent_after_the_literal_headers():
    argv = engine_argv(plan({"headers": ["X-A: 1"], "conditional": "etag"},
                            (("If-None-Match", '"abc"'),)), Path("u.txt"))
    assert argv[-2:] == ["--header=X-A: 1", '--header=If-None-Match: "abc"']


def test_no_headers_no_header_flags():
    assert not [a for a in engine_argv(plan(), Path("u.txt")) if a.startswith("--header")]


def test_an_unresolved_condition_refuses_to_start_the_engine():
    with pytest.raises(EngineError, match="no validator was read before the load"):
        engine_argv(plan({"conditional": "last-modified"}), Path("u.txt"))


# real servers ---------------------------------------------------------------------------

CONDITIONAL = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "conditional"
repetitions = 1
duration = "0.5s"
warmup = "0.2s"
[load]
keepalive = false
[matrix]
stack = ["apache+mod_php"]
workload = ["php-cacheable", "php-uncacheable", "php-cache-mix"]
concurrency = [4]
load.conditional = ["none", "etag"]
exclude = [{ workload = "php-uncacheable", load = { conditional = "none" } },
           { workload = "php-cache-mix", load = { conditional = "none" } }]
"""

# If-None-Match: * matches any current representation (RFC 9110 13.1.2): nginx answers
# 304 for its static page; php-uncacheable's script never looks at the condition.
STAR = """
[experiment]
remeasure = 0   # runs are counted: none measured again on a busy host
name = "star"
repetitions = 1
duration = "0.5s"
warmup = "0.2s"
[load]
headers = ["If-None-Match: *"]
[matrix]
stack = ["nginx+php-fpm"]
workload = ["static-page", "php-uncacheable"]
concurrency = [4]
"""


def run(tmp_path, text: str) -> dict:
    spec, db = tmp_path / "s.toml", tmp_path / "r.db"
    spec.write_text(text)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    rows = {}
    for label, outcome, reason, load, verdicts in sqlite3.connect(db).execute(
            "SELECT t.label, r.outcome, r.reason, r.load_json, r.verdicts_json "
            "FROM runs r JOIN trials t USING (trial_id)"):
        mine = [v for v in json.loads(verdicts) if v["check"] == "conditional GET"]
        # keyed without what every trial of the spec shares
        for common in (" c=4", " load.keepalive=False", " load.headers=['If-None-Match: *']"):
            label = label.replace(common, "")
        rows[label] = (outcome, reason, load and json.loads(load), mine)
    assert server_processes() == []
    return rows


@pytest.mark.integration
def test_conditional_gets_are_verified_304_and_measured_small_or_refused(tmp_path):
    require_engine()
    rows = run(tmp_path, CONDITIONAL)

    outcome, _, load, verdicts = rows["apache+mod_php php-cacheable load.conditional=etag"]
    assert outcome == "ok"
    assert [v["status"] for v in verdicts] == ["PASS"]
    assert verdicts[0]["detail"].startswith('304 Not Modified without a body to '
                                            'If-None-Match: "')
    assert load["config"]["headers"][0].startswith('If-None-Match: "')
    assert set(load["status_classes"]) == {"3xx"} and not load["requests"]["failed"]
    conditional = load["bytes"]["total"] / load["requests"]["completed"]

    outcome, _, load, verdicts = rows["apache+mod_php php-cacheable"]
    assert outcome == "ok" and verdicts == []           # nothing conditional, no check
    whole = load["bytes"]["total"] / load["requests"]["completed"]
    assert conditional < 400 < 2000 < whole             # a head against head and page

    # php-uncacheable sends no ETag: nothing to send back, nothing measured
    outcome, reason, load, verdicts = rows["apache+mod_php php-uncacheable "
                                           "load.conditional=etag"]
    assert (outcome, load) == ("invalid", None)
    assert [v["status"] for v in verdicts] == ["FAIL"]
    assert reason == ("conditional GET: load.conditional = 'etag': nothing to send as "
                      "If-None-Match (/uncacheable.php answered 200 with no ETag)")

    # half the URLs revalidate: measured, with a WARN saying which URL did not
    outcome, _, load, verdicts = rows["apache+mod_php php-cache-mix load.conditional=etag"]
    assert outcome == "ok" and [v["status"] for v in verdicts] == ["WARN"]
    assert verdicts[0]["detail"].startswith("1 of 2 URLs answered 304 without a body to "
                                            'If-None-Match: "')
    assert "/uncacheable.php 200 with " in verdicts[0]["detail"]
    assert set(load["status_classes"]) == {"2xx", "3xx"} and not load["requests"]["failed"]


@pytest.mark.integration
def test_a_literal_condition_the_server_ignores_fails_verification(tmp_path):
    require_engine()
    rows = run(tmp_path, STAR)
    outcome, _, load, verdicts = rows["nginx+php-fpm static-page"]
    assert outcome == "ok" and [v["status"] for v in verdicts] == ["PASS"]
    assert load["config"]["headers"] == ["If-None-Match: *"]
    assert set(load["status_classes"]) == {"3xx"}

    outcome, reason, load, verdicts = rows["nginx+php-fpm php-uncacheable"]
    assert (outcome, load) == ("invalid", None)
    assert [v["status"] for v in verdicts] == ["FAIL"]
    assert reason.startswith("conditional GET: If-None-Match: * was not answered 304 "
                             "without a body: /uncacheable.php 200 with ")
    assert "the server ignores the condition" in reason
