"""A real application's package tree deployed into a docroot: linked or copied once per
version, symlinks followed, its own configuration skipped, never written through."""

from __future__ import annotations

from pathlib import Path

from stacklab.measure.verify import Status, check_php_log
from stacklab.workloads import File, Tree, php_log_path
from stacklab.workloads.deploy import _copy_tree, _write


def _package(root: Path) -> Path:
    src = root / "usr-share-app"
    (src / "lib").mkdir(parents=True)
    (src / "index.php").write_text("<?php echo 1;")
    (src / "lib" / "a.php").write_text("<?php // a")
    (src / "config.php").write_text("<?php // the package's own config")
    data = root / "var-lib-app"
    (data / "extensions").mkdir(parents=True)
    (data / "extensions" / "x.php").write_text("<?php // x")
    (src / "extensions").symlink_to(data / "extensions")
    return src


def test_tree_is_linked_followed_and_skips_config(tmp_path):
    src, docroot = _package(tmp_path), tmp_path / "docroot"
    docroot.mkdir()
    manifest: dict = {}
    _copy_tree(Tree(src, "1.0", skip=("config.php",)), docroot, manifest)
    assert (docroot / "lib" / "a.php").read_text() == "<?php // a"
    assert (docroot / "extensions" / "x.php").is_file()          # the symlink followed
    assert not (docroot / "extensions").is_symlink()
    assert not (docroot / "config.php").exists()                 # the workload writes it
    assert (docroot / "index.php").stat().st_ino == (src / "index.php").stat().st_ino
    # Once per version: a file removed from the docroot comes back only for a new one.
    (docroot / "index.php").unlink()
    _copy_tree(Tree(src, "1.0"), docroot, manifest)
    assert not (docroot / "index.php").exists()
    _copy_tree(Tree(src, "1.1"), docroot, manifest)
    assert (docroot / "index.php").exists()


def test_a_workload_file_never_writes_through_a_link(tmp_path):
    src, docroot = _package(tmp_path), tmp_path / "docroot"
    docroot.mkdir()
    _copy_tree(Tree(src, "1.0"), docroot, {})
    _write(docroot, File("/config.php", b"<?php // ours"), "k", {})
    assert (docroot / "config.php").read_text() == "<?php // ours"
    assert (src / "config.php").read_text() == "<?php // the package's own config"


def test_php_log_check(tmp_path):
    log = php_log_path(tmp_path / "docroot")
    assert log.parent == tmp_path and log.name == "docroot.php.log"
    log.write_text("[28-Nov-2026] PHP Deprecated:  Creation of dynamic property\n")
    assert check_php_log(log).status is Status.PASS
    size = log.stat().st_size
    with log.open("a") as f:
        f.write("[28-Nov-2026] PHP Warning:  Undefined variable $x in /d/index.php on line 3\n")
    verdict = check_php_log(log)
    assert verdict.status is Status.FAIL and "Undefined variable" in verdict.detail
    assert check_php_log(log, offset=log.stat().st_size).status is Status.PASS
    assert check_php_log(log, offset=size).status is Status.FAIL
