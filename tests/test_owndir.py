"""`dir:PATH`: the user's own directory, copied into the run and checked file by file."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.errors import SpecError
from stacklab.experiment.spec import load_spec
from stacklab.stacks import REGISTRY, STACKS
from stacklab.workloads import WORKLOADS, canonical

from helpers import require_engine

SPEC = """
[experiment]
name = "own"
repetitions = 1
requests = 200
warmup = "0s"
remeasure = 0

[matrix]
stack = ["{stack}"]
workload = ["dir:{site}"]
concurrency = [2]
"""


def _site(root):
    site = root / "site"
    (site / "img").mkdir(parents=True)
    (site / "index.html").write_text("<html><title>mine</title><p>hello</p></html>\n")
    (site / "img" / "dot.bin").write_bytes(bytes(range(256)) * 40)
    (site / ".git").mkdir()
    (site / ".git" / "config").write_text("[core]\n")
    (site / ".env").write_text("SECRET=1\n")
    return site


def _spec(tmp_path, site="site", stack="nginx"):
    spec = tmp_path / "own.toml"
    spec.write_text(SPEC.format(site=site, stack=stack))
    return spec


def test_relative_to_the_experiment_file_and_hidden_files_left_out(tmp_path):
    site = _site(tmp_path)
    spec = load_spec(_spec(tmp_path), REGISTRY, STACKS, set(WORKLOADS))
    assert spec.axes["workload"] == (f"dir:{site}",)
    w = WORKLOADS[f"dir:{site}"]
    assert dict(w.urls) == {"/index.html": 1, "/img/dot.bin": 1}
    assert w.needs == ()
    assert canonical("dir:site", tmp_path) == f"dir:{site}"


@pytest.mark.parametrize("make, why", [
    (lambda root: None, "no such directory"),
    (lambda root: (root / "site").write_text("x"), "not a directory"),
    (lambda root: (root / "site").mkdir(), "holds no file to serve"),
])
def test_a_directory_that_cannot_be_served_is_one_clear_error(tmp_path, make, why):
    make(tmp_path)
    with pytest.raises(SpecError) as e:
        load_spec(_spec(tmp_path), REGISTRY, STACKS, set(WORKLOADS))
    text = str(e.value)
    assert "matrix.workload" in text and why in text and str(tmp_path / "site") in text
    assert len(text.splitlines()) == 1


def test_php_files_make_it_need_php(tmp_path):
    site = _site(tmp_path)
    (site / "index.php").write_text("<?php echo 'hi';")
    assert WORKLOADS[f"dir:{site}"].needs == ("php",)
    result = CliRunner().invoke(cli, ["run", str(_spec(tmp_path)), "--dry-run",
                                      "--db", str(tmp_path / "x.db")])
    assert result.exit_code != 0 and "needs php" in result.output, result.output


@pytest.mark.integration
def test_served_from_a_copy_and_every_file_checked(tmp_path):
    require_engine()
    site = _site(tmp_path)
    db = tmp_path / "r" / "stacklab.db"
    result = CliRunner().invoke(cli, ["run", str(_spec(tmp_path)), "--db", str(db)])
    assert result.exit_code == 0, result.output
    row = sqlite3.connect(db).execute("SELECT outcome, verdicts_json, load_json FROM runs"
                                      ).fetchone()
    assert row[0] == "ok"
    checks = {v["check"]: v for v in json.loads(row[1])}
    digest = hashlib.sha256((site / "img" / "dot.bin").read_bytes()).hexdigest()[:12]
    assert checks["content /img/dot.bin"]["status"] == "PASS"
    assert digest in checks["content /img/dot.bin"]["detail"]
    assert checks["content /index.html"]["status"] == "PASS"
    assert not any(".env" in c or ".git" in c for c in checks)
    assert json.loads(row[2])["status"] == {"200": 200}


def test_dir_without_a_path_is_refused(tmp_path):
    spec = tmp_path / "own.toml"
    spec.write_text(SPEC.format(site="", stack="nginx").replace('"dir:"', '"dir"'))
    with pytest.raises(SpecError) as e:
        load_spec(spec, REGISTRY, STACKS, set(WORKLOADS))
    assert "matrix.workload" in str(e.value) and "dir:PATH" in str(e.value)


def test_a_name_a_url_must_encode_is_refused_with_its_path(tmp_path):
    site = _site(tmp_path)
    (site / "my page.html").write_text("x")
    with pytest.raises(SpecError) as e:
        load_spec(_spec(tmp_path), REGISTRY, STACKS, set(WORKLOADS))
    assert "my page.html" in str(e.value) and "rename" in str(e.value)


def test_a_php_script_may_change_its_length_a_static_file_may_not(tmp_path):
    site = _site(tmp_path)
    (site / "now.php").write_text("<?php echo time();")
    w = WORKLOADS[f"dir:{site}"]
    assert w.varying_length == frozenset({"/now.php"})
