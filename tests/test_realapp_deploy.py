"""A real application's package tree deployed into a docroot: linked or copied once per
version, symlinks followed, its own configuration skipped, never written through."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stacklab.errors import StackError
from stacklab.host.hostinfo import debian_version
from stacklab.measure.verify import Status, check_php_log
from stacklab.workloads import File, Tree, php_log_path
from stacklab.workloads.deploy import _copy_tree, _write
from stacklab.workloads.realapp import (PHP_CLI, SERVED_PHP_LOG, package_version,
                                        php_error_log_lines, php_string)


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


def test_a_recoverable_fatal_error_is_a_php_problem(tmp_path):
    log = tmp_path / "docroot.php.log"
    log.write_text("[28-Nov-2026] PHP Recoverable fatal error:  Object of class X could "
                   "not be converted to string in /d/index.php on line 3\n")
    verdict = check_php_log(log)
    assert verdict.status is Status.FAIL and "could not be converted" in verdict.detail


@pytest.mark.parametrize("text", ["plain", "it's", "a\\b", "trailing\\", "$HOME {$x}",
                                  "\\'", "new\nline"])
def test_php_string_reads_back_as_written(text):
    """Every configuration writer quotes with php_string: PHP itself reads the literal
    back unchanged (no $ interpolated, no quote ending it early)."""
    done = subprocess.run([PHP_CLI, "-n", "-r", f"echo {php_string(text)};"],
                          capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout == text


def test_the_error_log_lines_name_the_log_beside_the_docroot(tmp_path):
    """The PHP expression every served configuration uses gives php_log_path()."""
    docroot = tmp_path / "docroot"
    docroot.mkdir()
    script = docroot / "where.php"
    script.write_text(f"<?php\n{php_error_log_lines()}echo ini_get('error_log');\n")
    done = subprocess.run([PHP_CLI, "-n", str(script)], capture_output=True, text=True,
                          timeout=30, check=True)
    assert done.stdout == str(php_log_path(docroot))
    assert SERVED_PHP_LOG in php_error_log_lines()


def test_a_package_not_installed_has_no_version():
    assert debian_version("stacklab-no-such-package") is None
    assert debian_version("dpkg")
    with pytest.raises(StackError, match="stacklab-no-such-package"):
        package_version("stacklab-no-such-package")
