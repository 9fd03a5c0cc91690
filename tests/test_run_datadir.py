"""A database the application writes gets a datadir of its own per run; one it only reads
is used where it was seeded."""

from __future__ import annotations

from dataclasses import dataclass

from stacklab.stacks.mariadb.seed import STAMP, run_datadir


@dataclass
class _Db:
    grants: str


def _seeded(root):
    seeded = root / "cache" / "mariadb-x"
    (seeded / "stacklab_app").mkdir(parents=True)
    (seeded / "stacklab_app" / "wp_options.ibd").write_bytes(b"seeded")
    (seeded / STAMP).write_text("seeded\n")
    return seeded


def test_a_read_only_database_is_used_in_place(tmp_path):
    seeded = _seeded(tmp_path)
    assert run_datadir(seeded, tmp_path / "run", _Db("SELECT")) == seeded
    assert run_datadir(seeded, tmp_path / "run", None) == seeded


def test_a_written_database_is_a_copy_per_run(tmp_path):
    seeded = _seeded(tmp_path)
    first = run_datadir(seeded, tmp_path / "run1", _Db("ALL PRIVILEGES"))
    assert first == tmp_path / "run1" / "datadir" and not (first / STAMP).exists()
    (first / "stacklab_app" / "wp_options.ibd").write_bytes(b"written by run 1")
    second = run_datadir(seeded, tmp_path / "run2", _Db("ALL PRIVILEGES"))
    assert (second / "stacklab_app" / "wp_options.ibd").read_bytes() == b"seeded"
    assert (seeded / "stacklab_app" / "wp_options.ibd").read_bytes() == b"seeded"
    # a run directory used again starts from the seeded data, not from what it held
    again = run_datadir(seeded, tmp_path / "run1", _Db("ALL PRIVILEGES"))
    assert (again / "stacklab_app" / "wp_options.ibd").read_bytes() == b"seeded"
