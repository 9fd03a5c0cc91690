"""`stacklab list`, `--version` and the default database ($STACKLAB_DB, else one per
user): what a results database holds, as a table or as JSON checked against its schema."""

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from stacklab import __version__
from stacklab.cli import cli
from stacklab.env import Environment, user_db
from stacklab.store import Store

SCHEMA = Path(__file__).parent.parent / "stacklab" / "report" / "schemas" / "list.schema.json"


def stored(db: Path, *names: str) -> None:
    store = Store.open(db)
    try:
        for n, name in enumerate(names):
            store.new_experiment(name, f"{name}.toml", "h", {}, [("t1", "label", {})], {},
                                 "0", None, f"2026-11-2{n}T10:00:00.000+00:00")
    finally:
        store.close()


def test_list_names_every_experiment_and_its_json_keeps_its_schema(tmp_path):
    db = tmp_path / "r.db"
    stored(db, "quick", "keepalive")
    shown = CliRunner().invoke(cli, ["list", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert "quick" in shown.output and "keepalive" in shown.output
    as_json = CliRunner().invoke(cli, ["list", "--db", str(db), "--json"])
    doc = json.loads(as_json.output)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert [e["name"] for e in doc["experiments"]] == ["quick", "keepalive"]
    assert doc["experiments"][0]["runs"] == 0


def test_the_database_comes_from_the_environment_when_not_given(tmp_path, monkeypatch):
    db = tmp_path / "elsewhere.db"
    stored(db, "from-env")
    monkeypatch.setenv("STACKLAB_DB", str(db))
    env = Environment.default()
    assert env.db == db
    shown = CliRunner().invoke(cli, ["list"], obj=env)
    assert shown.exit_code == 0 and "from-env" in shown.output


def test_a_missing_database_says_where_it_looked(tmp_path):
    shown = CliRunner().invoke(cli, ["list", "--db", str(tmp_path / "none.db")])
    assert shown.exit_code != 0 and "none.db" in shown.output


def test_version():
    shown = CliRunner().invoke(cli, ["--version"])
    assert shown.exit_code == 0 and shown.output.strip() == f"stacklab {__version__}"


def test_stacks_json_keeps_its_schema_and_filters_by_component():
    schema = json.loads((SCHEMA.parent / "stacks.schema.json").read_text())
    whole = json.loads(CliRunner().invoke(cli, ["stacks", "--json"]).output)
    jsonschema.validate(whole, schema)
    assert {"varnish", "haproxy"} <= {layer["name"] for layer in whole["layers"]}
    only = json.loads(CliRunner().invoke(cli, ["stacks", "nginx", "--json"]).output)
    assert only["knobs"] and all(k["key"].startswith("nginx.") for k in only["knobs"])
    shown = CliRunner().invoke(cli, ["stacks", "machine"]).output
    assert "0..1048576" in shown and "e+06" not in shown      # integer ranges as integers
    bad = CliRunner().invoke(cli, ["stacks", "tomcat"])
    assert bad.exit_code == 2 and "'tomcat': unknown" in bad.output


# the default database: one per user, wherever a command runs ----------------------------

@pytest.mark.parametrize("environ, expected", [
    ({}, "/home/u/.local/share/stacklab/stacklab.db"),
    ({"XDG_DATA_HOME": "/data"}, "/data/stacklab/stacklab.db"),
    ({"XDG_DATA_HOME": "relative/dir"}, "/home/u/.local/share/stacklab/stacklab.db"),
    ({"XDG_DATA_HOME": ""}, "/home/u/.local/share/stacklab/stacklab.db"),
    ({"XDG_DATA_HOME": "/data", "STACKLAB_DB": "/ci/r.db"}, "/ci/r.db"),
    ({"STACKLAB_DB": "r.db"}, "r.db"),            # as given: the user chose it
])
def test_the_default_database_is_the_users(environ, expected):
    assert user_db(environ, Path("/home/u")) == Path(expected)


def test_the_default_database_is_not_relative_to_the_current_directory(tmp_path,
                                                                       monkeypatch):
    monkeypatch.delenv("STACKLAB_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    db = Environment.default().db
    assert db == tmp_path / "data" / "stacklab" / "stacklab.db" and db.is_absolute()
    stored(db, "first")              # what `run` does first: Store.open makes the directory
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    shown = CliRunner().invoke(cli, ["list"], obj=Environment.default())
    assert shown.exit_code == 0 and "first" in shown.output


@pytest.mark.parametrize("argv", [["--help"], ["show", "--help"], ["run", "--help"]])
def test_help_names_the_default_database(argv):
    shown = CliRunner().invoke(cli, argv, env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.replace("│", " ").split())
    assert "$STACKLAB_DB, else $XDG_DATA_HOME/stacklab/stacklab.db" in text, text
    assert "(~/.local/share/stacklab/stacklab.db)" in text
    assert "results/stacklab.db" not in text
