"""Provenance of what a workload serves: a real application's Debian packages, the hash
of a dir:'s files and of the replayed access log join each run's versions, as an include
file's hash does, so that `--resume` refuses to pool runs of other content (an apt
upgrade, an edited site, an edited log) with the stored ones.

The runs are real short ones on nginx, loaded by the fake engine (tests/fake_engine):
what is checked is what is stored and refused, not what is measured."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.workloads import WORKLOADS, owndir
from stacklab.workloads.accesslog import read_log
from stacklab.workloads.realapp import package_version

from fakes import use_fake_engine
from helpers import ROOT, server_processes

SAMPLE = ROOT / "presets" / "sample-access.log"

SPEC = """
[experiment]
name = "{name}"
repetitions = 2
requests = 50
warmup = "0s"
remeasure = 0
keep_cpus_awake = false
{load}
[matrix]
stack = ["nginx"]
workload = ["{workload}"]
concurrency = [2]
"""

REPLAY = """
[load]
replay = "{log}"
"""


def invoke(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def _site(root):
    site = root / "site"
    (site / "img").mkdir(parents=True)
    (site / "index.html").write_text("<html><title>mine</title><p>hello</p></html>\n")
    (site / "img" / "dot.bin").write_bytes(bytes(range(256)) * 4)
    (site / ".git").mkdir()
    (site / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return site


# ---- what a workload records ----------------------------------------------------------


@pytest.mark.parametrize("workload, packages", [
    ("wordpress-front", ("wordpress", "wordpress-theme-twentytwentythree")),
    ("wordpress", ("wordpress", "wordpress-theme-twentytwentythree")),
    ("mediawiki-article", ("mediawiki",)),
    ("phpmyadmin-browse", ("phpmyadmin",)),
])
def test_a_real_application_records_its_packages_versions(workload, packages):
    assert WORKLOADS[workload].versions() == {p: package_version(p) for p in packages}


def test_a_generated_workload_records_nothing_beyond_the_seed():
    assert WORKLOADS["static-page"].versions() == {}
    assert WORKLOADS["static-page:600"].versions() == {}


def test_a_dirs_hash_follows_its_copied_files(tmp_path):
    site = _site(tmp_path)
    workload = WORKLOADS[f"dir:{site}"]
    [(key, first)] = workload.versions().items()
    assert key == f"dir {site}" and first.startswith("sha256:")
    assert workload.versions()[key] == first            # the same files: the same hash
    (site / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    assert workload.versions()[key] == first            # not copied, not hashed
    (site / "index.html").write_text("<html><title>mine</title><p>edited</p></html>\n")
    edited = workload.versions()[key]
    assert edited != first
    (site / "index.html").rename(site / "home.html")     # the same bytes at another URL
    assert owndir.digest(site) not in (first[7:], edited[7:])


def test_a_replays_record_carries_the_logs_hash():
    log = read_log(SAMPLE)
    assert log.sha256 == hashlib.sha256(SAMPLE.read_bytes()).hexdigest()


# ---- stored with each run, and a resume refused when it changed -------------------------


def _interrupted_after_one(db) -> sqlite3.Connection:
    """The experiment as an interrupt after its first run leaves it: run 2 to come."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM runs WHERE repetition = 2")
        conn.execute("UPDATE experiments SET status = 'interrupted'")
    return conn


def _refused(spec, db, conn, named: str) -> None:
    code, out = invoke("run", spec, "--db", db, "--resume")
    assert code == 1, out
    line = " ".join(out.split())
    assert "--resume" in line and named in line and "run without --resume" in line, line
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    assert conn.execute("SELECT status FROM experiments").fetchone()[0] == "interrupted"
    assert server_processes() == []


@pytest.mark.integration
def test_an_edited_dir_is_stored_and_refuses_a_resume(tmp_path, monkeypatch):
    use_fake_engine(monkeypatch, tmp_path / "engine")
    site = _site(tmp_path)
    spec, db = tmp_path / "own.toml", tmp_path / "r.db"
    spec.write_text(SPEC.format(name="own", load="", workload="dir:site"))
    code, out = invoke("run", spec, "--db", db)
    assert code == 0, out
    conn = _interrupted_after_one(db)
    [(outcome, text)] = conn.execute("SELECT outcome, versions_json FROM runs").fetchall()
    assert outcome == "ok"
    then = json.loads(text)[f"dir {site}"]
    assert then == f"sha256:{owndir.digest(site)}"
    (site / "img" / "dot.bin").write_bytes(b"edited")
    now = f"sha256:{owndir.digest(site)}"
    _refused(spec, db, conn, f"dir {site} was {then} when its runs were measured and is "
                             f"{now} now")
    # the site as it was: the resume completes the experiment
    (site / "img" / "dot.bin").write_bytes(bytes(range(256)) * 4)
    code, out = invoke("run", spec, "--db", db, "--resume")
    assert code == 0, out
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2


@pytest.mark.integration
def test_an_edited_replay_log_is_stored_and_refuses_a_resume(tmp_path, monkeypatch):
    use_fake_engine(monkeypatch, tmp_path / "engine")
    log = tmp_path / "access.log"
    shutil.copy(SAMPLE, log)
    spec, db = tmp_path / "replay.toml", tmp_path / "r.db"
    spec.write_text(SPEC.format(name="replay", load=REPLAY.format(log=log.name),
                                workload="portal-site"))
    code, out = invoke("run", spec, "--db", db)
    assert code == 0, out
    conn = _interrupted_after_one(db)
    [(outcome, versions, resources)] = conn.execute(
        "SELECT outcome, versions_json, resources_json FROM runs").fetchall()
    assert outcome == "ok"
    digest = hashlib.sha256(log.read_bytes()).hexdigest()
    assert json.loads(versions)[f"load.replay {log}"] == f"sha256:{digest}"
    assert json.loads(resources)["_replay"]["sha256"] == digest
    with open(log, "a") as f:       # one more request of the same site
        f.write(log.read_text().splitlines()[0] + "\n")
    now = hashlib.sha256(log.read_bytes()).hexdigest()
    _refused(spec, db, conn, f"load.replay {log} was sha256:{digest} when its runs were "
                             f"measured and is sha256:{now} now")
