"""`dir:PATH`: the user's own directory, copied into the run and checked file by file."""

from __future__ import annotations

import hashlib
import os
import stat
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


# What the directory holds besides files: a link out of it is never served ----------------

def _refused(tmp_path) -> str:
    with pytest.raises(SpecError) as e:
        load_spec(_spec(tmp_path), REGISTRY, STACKS, set(WORKLOADS))
    text = str(e.value)
    assert "matrix.workload" in text and len(text.splitlines()) == 1
    return text


def test_a_symlink_out_of_the_directory_is_refused_not_served(tmp_path):
    """stacklab runs as root: a link to /etc/shadow was copied into the docroot and
    served as /shadow.html."""
    site = _site(tmp_path)
    (site / "shadow.html").symlink_to("/etc/shadow")
    text = _refused(tmp_path)
    assert f"{site / 'shadow.html'}: a symlink out of the directory (to /etc/shadow)" in text
    (site / "shadow.html").unlink()
    (site / "up.html").symlink_to("../own.toml")          # relative, still out
    assert "a symlink out of the directory" in _refused(tmp_path)


def test_a_symlink_inside_the_directory_serves_its_target(tmp_path):
    site = _site(tmp_path)
    (site / "home.html").symlink_to("index.html")
    w = WORKLOADS[f"dir:{site}"]
    assert dict(w.urls) == {"/home.html": 1, "/index.html": 1, "/img/dot.bin": 1}
    from stacklab.workloads import owndir
    built = {f.path: f.content for f in owndir.build(site)}
    assert built["/home.html"] == built["/index.html"] == (site / "index.html").read_bytes()


@pytest.mark.parametrize("make, said", [
    (lambda site: os.mkfifo(site / "pipe.html"), "a FIFO, not a file"),
    (lambda site: (site / "zero.html").symlink_to("/dev/zero"), "a symlink out of"),
    (lambda site: (site / "gone.html").symlink_to("nothing-here"), "a broken symlink"),
    (lambda site: (site / "img2").symlink_to(site / "img"), "a symlink to a directory"),
])
def test_what_is_not_a_file_is_named_not_skipped(tmp_path, make, said):
    site = _site(tmp_path)
    make(site)
    assert said in _refused(tmp_path)


def test_a_device_file_is_named_not_skipped(tmp_path):
    site = _site(tmp_path)
    os.mknod(site / "null.html", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    assert "null.html: a character device, not a file" in _refused(tmp_path)


def test_a_symlink_to_a_hidden_file_is_refused(tmp_path):
    site = _site(tmp_path)
    (site / "a.txt").symlink_to(".env")
    assert "a symlink to a hidden file" in _refused(tmp_path)
    (site / "a.txt").unlink()
    (site / "b.txt").symlink_to(".git/config")
    assert "a symlink to a hidden file" in _refused(tmp_path)


def test_a_link_swapped_in_after_the_listing_is_not_read(tmp_path):
    from stacklab.workloads import owndir
    site = _site(tmp_path)
    listed = owndir.files(site)
    (site / "index.html").unlink()
    (site / "index.html").symlink_to("/etc/hostname")
    with pytest.raises(ValueError, match="left the directory"):
        owndir._read(dict(listed)["/index.html"], site)
