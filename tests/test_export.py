"""The JSON export is a contract: a real export (real servers, the real engine, an invalid
run beside measured ones, TLS) follows stacklab/report/export.schema.json, the engine
reports it carries follow the engine's schema, and the version is the one the README's
changelog describes."""

import json
import re

import jsonschema
import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.report import export

from fakes import checked, fake_experiment
from helpers import ROOT, require_engine, server_processes, tamper

SCHEMA = json.loads((ROOT / "stacklab" / "report" / "export.schema.json").read_text())

MIXED = """
[experiment]
name = "mixed"
repetitions = 1
requests = 200
warmup = "0s"

[matrix]
stack = ["nginx", "apache"]
workload = ["static-page"]
concurrency = [2]
nginx.tls = [false, true]
"""


def exported(db, name: str) -> dict:
    result = CliRunner().invoke(cli, ["export", name, "--format", "json", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_schema_is_a_schema_of_this_version():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema_version"] == {"const": export.SCHEMA_VERSION}
    readme = (ROOT / "README.md").read_text()
    changelog = readme.split("## Export JSON: schema changelog", 1)[1].split("\n## ", 1)[0]
    assert re.search(rf"^\*\*{export.SCHEMA_VERSION}\*\* \(this version\)", changelog, re.M)


@pytest.mark.integration
def test_a_real_export_follows_its_schema(tmp_path, monkeypatch):
    """Apache's config says KeepAlive Off while its knob says on: its run is invalid (no
    load); nginx's runs are measured, one over TLS."""
    require_engine()
    tamper(monkeypatch, "apache", "httpd.conf", r"^KeepAlive On$", "KeepAlive Off")
    spec, db = tmp_path / "mixed.toml", tmp_path / "stacklab.db"
    spec.write_text(MIXED)
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert server_processes() == []
    doc = exported(db, "mixed")
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["schema_version"] == export.SCHEMA_VERSION
    assert sorted(r["outcome"] for r in doc["runs"]) == ["invalid", "ok", "ok"]
    for run in doc["runs"]:
        if run["load"] is not None:
            checked(run["load"])                   # the engine's report, whole
    assert [t["tls"]["protocols"] for t in doc["trials"] if t["tls"]] == [["TLSv1.3"]]
    invalid = next(t for t in doc["trials"] if t["runs_invalid"])
    assert invalid["stack"] == "apache" and invalid["rps"]["median"] is None
    assert any(v["status"] == "FAIL" for v in invalid["verdicts"])


def test_the_fixed_export_follows_its_schema(tmp_path):
    """Flags with their details, several repetitions and estimates with intervals."""
    fake_experiment(tmp_path / "r.db")
    doc = exported(tmp_path / "r.db", "fixed")
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert any(t["flag_details"] for t in doc["trials"])
    assert all(t["rps"]["ci"] for t in doc["trials"])
