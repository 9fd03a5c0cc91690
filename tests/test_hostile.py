"""Nothing from outside reaches a config, a path or a terminal as it came.

A lab root (TMPDIR) is written into every server's config; a stored config name
becomes a file name; a spec's keys and text reach the one-line error and the report.
Each is tried here with what an attacker or an accident would put there."""

import json
import os
import subprocess
import tempfile

import pytest
from typer.testing import CliRunner

from stacklab.host import lab
from stacklab.netlab.sweep import SWEEPS
from stacklab.cli import cli
from stacklab.errors import SpecError, StackError, UnsafePathError
from stacklab.run.exportconfig import export_config
from stacklab.experiment.spec import load_spec
from stacklab.stacks import COMPONENTS, REGISTRY, STACKS
from stacklab.stacks.templates import quote, render_template
from stacklab.store import Outcome, RunRecord

from helpers import CONFIG_TEST_FLAGS, rendered_stack
from test_stacks import knobs_for

# A directory name that is a directive in nginx (and a command in sh), with a space,
# both quotes, a comment sign, braces and a backslash.
HOSTILE = "h ;include /etc/passwd;\" '#{x}\\y"
# Knobs that bring more paths into a config (logs, certificates, caches).
PATH_KNOBS = ("tls", "access_log", "deflate")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# 1. paths in configs ------------------------------------------------------------------

def every_path_on(stack: str) -> dict:
    """Overrides that make `stack` write every path its templates can hold."""
    out = {f"{c}__{k}": True for c in STACKS[stack].components for k in PATH_KNOBS
           if REGISTRY.get(f"{c}.{k}")}
    if "perl:cgi" in STACKS[stack].provides:
        out["apache__mpm"] = "event"         # cgid: ScriptSock
    return out


def _values(parsed):
    """Every leaf value of a parsed ini file (sections and key[] arrays included)."""
    if isinstance(parsed, dict):
        for v in parsed.values():
            yield from _values(v)
    else:
        yield str(parsed)


def _assert_whole(values, base, where):
    """Each value that names a path under the hostile directory names it whole: not cut
    at the space, the ';', the '#' or a quote."""
    outer = str(base.parent)
    cut = [v for v in values if outer in v and str(base) not in v]
    assert not cut, f"{where}: paths cut short: {cut}"


@pytest.mark.parametrize("variant", ["defaults", "every-path"])
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_every_stack_quotes_a_hostile_lab_path_in_every_config(session, monkeypatch, stack,
                                                               variant):
    """Each server's own config test accepts the files (no /etc/passwd parsed as config);
    PHP's and MariaDB's parsers read every path back whole; a rendered script runs."""
    monkeypatch.setattr("stacklab.stacks.mariadb.adapter.ensure_datadir",
                        lambda *a, **k: False)        # a seeded datadir is not the point
    monkeypatch.setattr("stacklab.stacks.php.install.CGI_BINARY", "/usr/bin/env")
    base = session.dir / "hostile" / HOSTILE
    base.mkdir(parents=True)
    knobs = knobs_for(stack, **(every_path_on(stack) if variant == "every-path" else {}))
    _, rendered = rendered_stack(base, stack, knobs)
    for name, ctx in rendered:
        comp = COMPONENTS[name]
        env = comp.env(ctx, knobs[name])
        env = None if env is None else {**os.environ, **env}
        argv = comp.command(ctx, knobs[name])
        _assert_whole(argv, base, f"{name} argv")
        if name in CONFIG_TEST_FLAGS:
            done = subprocess.run([*argv, *CONFIG_TEST_FLAGS[name]], cwd=ctx.run_dir, env=env,
                                  capture_output=True, text=True, timeout=30)
            output = (done.stdout + done.stderr).replace(str(base), "<base>")
            assert done.returncode == 0 and "passwd" not in output, f"{name}: {output}"
        for path in sorted(ctx.run_dir.rglob("*")):
            if path.suffix == ".ini" or path.name == "php-fpm.conf":
                _assert_whole(_php_ini(path), base, path.name)
            elif path.name == "my.cnf":
                _assert_whole(_my_print_defaults(path), base, path.name)
            elif path.is_file() and path.read_text().startswith("#!/bin/sh"):
                done = subprocess.run(["sh", path], capture_output=True, text=True,
                                      timeout=10)
                assert done.returncode == 0 and not done.stderr, done.stderr
                _assert_whole(done.stdout.splitlines(), base, path.name)


def _php_ini(path):
    """The file as PHP's own ini parser reads it (the one php-fpm uses too)."""
    code = "echo json_encode(parse_ini_file($argv[1], true, INI_SCANNER_NORMAL));"
    done = subprocess.run(["php", "-n", "-r", code, str(path)], capture_output=True,
                          text=True, timeout=10)
    assert done.returncode == 0 and done.stdout != "false", f"{path.name}: {done.stderr}"
    return list(_values(json.loads(done.stdout)))


def _my_print_defaults(path):
    done = subprocess.run(["my_print_defaults", f"--defaults-file={path}", "mariadbd"],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("syntax, value, want", [
    ("nginx", 'a b;"c\\', '"a b;\\"c\\\\"'),
    ("apache", 'a b"c\\', '"a b\\"c\\\\"'),
    ("lighttpd", 'a\\b"c', '"a\\b\\"c"'),         # lighttpd keeps a lone backslash
    ("ini", 'a"${HOME}\\', '"a\\"\\${HOME}\\\\"'),
    ("mycnf", "a'#\"\\", '"a\\\'#\\"\\\\"'),
    ("sql", "a'\\", "'a\\'\\\\'"),
    ("sh", "a' b", "'a'\"'\"' b'"),
])
def test_quote_writes_one_argument_per_language(syntax, value, want):
    assert quote(value, syntax) == want


@pytest.mark.parametrize("syntax, value", [
    ("nginx", "/a$uri"), ("apache", "/a${HOME}"), ("php-fpm", "/a$pool"),
    ("lighttpd", "/a\\"), ("nginx", "/a\nb"), ("ini", "/a\x00"), ("mycnf", "/a\x1b"),
])
def test_quote_refuses_what_a_language_cannot_hold(syntax, value):
    with pytest.raises(StackError, match="cannot be written into"):
        quote(value, syntax)


def test_a_template_writing_a_path_without_q_is_refused(tmp_path):
    from dataclasses import dataclass
    from pathlib import Path

    @dataclass
    class Ctx:
        run_dir: Path

    raw, bare = tmp_path / "raw.conf.j2", tmp_path / "bare.conf.j2"
    raw.write_text('{%- set syntax = "nginx" -%}\npid {{ run_dir }}/x.pid;\n')
    bare.write_text('pid {{ run_dir | q("x.pid") }};\n')
    for template, message in ((raw, "without `| q`"), (bare, "declare its syntax")):
        with pytest.raises(StackError, match=message) as e:
            render_template(template, Ctx(tmp_path / "a b"), {})
        assert template.name in str(e.value)


@pytest.mark.parametrize("name, bad", [("a;b", ";"), ("a b", " "), ('a"b', '"'),
                                      ("a{b", "{"), ("a#b", "#"), ("a\\b", "\\"),
                                      ("a\x1bb", "\x1b"), ("a$b", "$"), ("a:b", ":")])
def test_a_lab_root_a_config_cannot_hold_is_refused_naming_it(tmp_path, name, bad):
    root = tmp_path / name
    with pytest.raises(UnsafePathError) as e:
        lab.open_session(root, sweeps=SWEEPS)
    message = str(e.value)
    assert repr(bad)[1:-1] in message and "\n" not in message and "\x1b" not in message
    assert str(tmp_path) in message
    assert not root.exists()                  # refused before anything is made


def test_a_tmpdir_with_a_semicolon_is_one_line_and_exit_2(tmp_path, monkeypatch):
    hostile = tmp_path / "t;include"
    hostile.mkdir()
    monkeypatch.setenv("TMPDIR", str(hostile))
    monkeypatch.setattr(tempfile, "tempdir", None)     # gettempdir() reads TMPDIR again
    result = invoke("run", "presets/quick.toml", "--db", tmp_path / "r.db")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(hostile) in lines[0] and "';'" in lines[0], lines
    assert not any(hostile.iterdir())
    assert not (tmp_path / "r.db").exists()    # refused before an experiment is stored


def test_the_report_never_carries_a_control_character(tmp_path):
    """A database written elsewhere may hold a NUL or an ESC in a text field."""
    import sqlite3
    from fakes import fake_experiment
    db = tmp_path / "r.db"
    fake_experiment(db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET reason = ?, outcome = 'failed' WHERE id = 1",
                 ("bad\x00news\x1b[31m",))
    conn.commit()
    out = tmp_path / "r.html"
    assert invoke("report", "--db", db, "-o", out).exit_code == 0
    html = out.read_text()
    assert "badnews[31m" in html and "\x00" not in html and "\x1b" not in html


def test_a_plain_lab_root_still_opens(tmp_path):
    session = lab.open_session(sweeps=SWEEPS)          # under tmp_path (0700) www-data could not search it
    session.close()


# 2. export-config names ---------------------------------------------------------------

def stored_run(configs: dict) -> RunRecord:
    return RunRecord(experiment_id=1, trial_id="ab0000000001", repetition=1,
                     outcome=Outcome.OK, started_at="2026-01-01T00:00:00",
                     ended_at="2026-01-01T00:00:03", knobs={"nginx": {}},
                     versions={"nginx": "1.22.1"}, configs=configs, run_dir="/tmp/x")


@pytest.mark.parametrize("name", ["../outside.conf", "nginx/../../outside.conf",
                                  "/ABS/outside.conf", "", ".", "nginx/\x1b[31m.conf",
                                  "nginx/a\x00.conf"])
def test_export_config_refuses_a_name_outside_the_output_directory(tmp_path, name):
    out = tmp_path / "out" / "deeper"
    name = name.replace("/ABS", str(tmp_path))
    run = stored_run({"nginx/nginx.conf": "root /x;\n", name: "pwned\n"})
    with pytest.raises(UnsafePathError) as e:
        export_config(run, "nginx", out)
    message = str(e.value)
    assert repr(name) in message and "\n" not in message and "\x1b" not in message
    assert not (tmp_path / "outside.conf").exists() and not (tmp_path / "out").exists()


def test_export_config_refuses_a_name_through_a_symlink(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "link").symlink_to(tmp_path)
    run = stored_run({"link/outside.conf": "pwned\n"})
    with pytest.raises(UnsafePathError):
        export_config(run, "nginx", out)
    assert not (tmp_path / "outside.conf").exists()


def test_export_config_from_a_crafted_database_is_one_line_and_exit_2(tmp_path):
    import sqlite3
    from test_cli import knob_experiment
    db = tmp_path / "k.db"
    knob_experiment(db)
    with sqlite3.connect(db) as conn:         # a shared database someone wrote into
        conn.execute("UPDATE runs SET configs_json = ?",
                     (json.dumps({"../../escaped.conf": "pwned\n"}),))
    result = invoke("export-config", "sf1", "-o", tmp_path / "a" / "b", "--db", db)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "escaped.conf" in result.output
    assert not (tmp_path / "escaped.conf").exists()


# 3. control characters in errors and text fields ----------------------------------------

SPEC = """[experiment]
name = "x"
description = "{description}"
duration = "1s"
[knobs]
{key} = {value}
[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [1]
"""


def write_spec(tmp_path, description="plain", key="nginx.sendfile", value="true"):
    path = tmp_path / "s.toml"
    path.write_text(SPEC.format(description=description, key=key, value=value))
    return path


def test_a_key_with_an_escape_sequence_is_one_escaped_line(tmp_path):
    spec = write_spec(tmp_path, key='"\\u001b[31m"')
    result = invoke("run", spec, "--dry-run", "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    assert "\x1b" not in result.output and "\\x1b[31m" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_key_with_a_newline_does_not_split_the_line(tmp_path):
    spec = write_spec(tmp_path, key='"a\\nstacklab: error: forged"')
    result = invoke("run", spec, "--dry-run", "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "a\\nstacklab: error: forged" in result.output


@pytest.mark.parametrize("char", ["\\u0000", "\\u001b", "\\r", "\\u007f", "\\u0085"])
def test_a_description_with_a_control_character_is_refused(tmp_path, spec_args, char):
    with pytest.raises(SpecError) as e:
        load_spec(write_spec(tmp_path, description=f"a{char}b"), *spec_args)
    assert e.value.key == "experiment.description"
    assert all(c.isprintable() for c in str(e.value))


def test_a_description_may_span_lines(tmp_path, spec_args):
    spec = load_spec(write_spec(tmp_path, description="line one\\n\\tline two"), *spec_args)
    assert spec.experiment.description == "line one\n\tline two"


def test_escape_key_and_nul_description_are_one_escaped_line_and_nothing_stored(tmp_path):
    spec = write_spec(tmp_path, description="a\\u0000b", key='"\\u001b[31m"')
    db = tmp_path / "r.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "\x1b" not in result.output and "\x00" not in result.output
    assert "\\x00" in result.output or "\\x1b" in result.output
    assert not db.exists()              # refused before anything reached the database
    report = invoke("report", "-o", tmp_path / "r.html", "--db", db)
    assert report.exit_code in (1, 2), report.output     # one error line, not a crash
    assert len(report.output.strip().splitlines()) == 1 and "Traceback" not in report.output
    assert not (tmp_path / "r.html").exists()


def test_every_error_message_is_one_printable_line():
    from stacklab.errors import StackError, StacklabError
    for e in (StacklabError("a\nb\x1b[2J\x00"), StackError("x\ry", "log\ntail"),
              SpecError("f\x1b.toml", "k\n", "v\x00", "p\u202e")):
        assert str(e).isprintable(), repr(str(e))
    assert str(SpecError("s.toml", "knobs.\x1b[31m", 1, "expected a table")) == (
        "s.toml: knobs.\\x1b[31m = 1: expected a table")
