"""A config of one's own: nginx.include, apache.include, php.ini_extra and
mariadb.cnf_extra — named relative to the experiment file, checked by the server's own
config test before anything starts, included after stacklab's settings on real servers,
and kept with the run (its configs, its versions, export-config)."""

from dataclasses import replace
from pathlib import Path

import pytest

from stacklab.errors import SpecError, StackError
from stacklab.experiment.spec import parse_spec
from stacklab.measure.verify import Status, fetch
from stacklab.run.exportconfig import export_config
from stacklab.run.stack import RunningStack, start_stack, stop_stack, verify_stack
from stacklab.stacks import COMPONENTS, STACKS
from stacklab.stacks.mariadb.client import query
from stacklab.stacks.tls import make_certificate
from stacklab.store import RunRecord
from stacklab.workloads import deploy
from stacklab.workloads.appdata import AppDatabase

from helpers import server_processes
from test_stacks import assert_all_pass, knobs_for, statuses
from test_workloads import running

KNOBS = {"nginx": "include", "apache": "include", "php": "ini_extra",
         "mariadb": "cnf_extra"}
# A file each server's own test refuses, and what it says about it.
REFUSED = {
    "nginx": ("foo bar;\n", 'unknown directive "foo"'),
    "apache": ("Foo bar\n", "Invalid command 'Foo'"),
    "php": ("memory_limit = 64M\nfoo = = bar\n", "syntax error, unexpected '='"),
    "mariadb": ("wait_timeout = 60\nbogus_var = 1\n", "unknown variable 'bogus_var=1'"),
}
STACK = {"nginx": "nginx", "apache": "apache", "php": "nginx+php-fpm",
         "mariadb": "nginx+php-fpm+mariadb"}


def spec(tmp_path: Path, owner: str, value: str) -> dict:
    return {"experiment": {"name": "own", "duration": "2s", "repetitions": 1},
            "knobs": {owner: {KNOBS[owner]: value}},
            "matrix": {"stack": [STACK[owner]], "workload": ["php-page"],
                       "concurrency": [1]}}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# the experiment file ---------------------------------------------------------------------

@pytest.mark.parametrize("owner", sorted(KNOBS))
def test_a_path_is_relative_to_the_experiment_file_and_checked_by_the_server(
        tmp_path, spec_args, owner):
    good = {"nginx": "add_header X-Mine yes;\n", "apache": 'ErrorDocument 404 "mine"\n',
            "php": "short_open_tag = On\n", "mariadb": "wait_timeout = 1234\n"}[owner]
    write(tmp_path / "conf" / "mine", good)
    parsed = parse_spec(spec(tmp_path, owner, "conf/mine"), str(tmp_path / "e.toml"),
                        *spec_args)
    assert parsed.fixed_knobs[f"{owner}.{KNOBS[owner]}"] == str(tmp_path / "conf" / "mine")


@pytest.mark.parametrize("owner", sorted(KNOBS))
def test_a_file_the_servers_test_refuses_is_one_error_naming_knob_file_and_message(
        tmp_path, spec_args, owner):
    text, said = REFUSED[owner]
    bad = write(tmp_path / "bad.conf", text)
    with pytest.raises(SpecError) as e:
        parse_spec(spec(tmp_path, owner, "bad.conf"), str(tmp_path / "e.toml"), *spec_args)
    key = f"{owner}.{KNOBS[owner]}"
    assert e.value.key == f"knobs.{key}" and e.value.value == str(bad)
    assert e.value.problem.startswith(f"{key}: the server's config test refuses it: ")
    assert said in e.value.problem
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("owner", sorted(KNOBS))
def test_a_missing_file_is_one_line_naming_the_knob_and_the_path(tmp_path, spec_args,
                                                                 owner):
    with pytest.raises(SpecError) as e:
        parse_spec(spec(tmp_path, owner, "nope.conf"), str(tmp_path / "e.toml"), *spec_args)
    key = f"{owner}.{KNOBS[owner]}"
    assert e.value.problem == f"{key}: {tmp_path / 'nope.conf'}: No such file or directory"
    assert "\n" not in str(e.value)


def test_exclude_and_baseline_name_a_file_as_the_matrix_does(tmp_path, spec_args):
    """A relative path in matrix.exclude and thresholds.baseline is the experiment
    file's, as in the matrix: it matches the axis value it names."""
    for name in ("a.conf", "b.conf"):
        write(tmp_path / "conf" / name, "add_header X-Mine yes;\n")
    doc = {"experiment": {"name": "own", "duration": "2s"},
           "matrix": {"stack": ["nginx"], "workload": ["static-page"],
                      "concurrency": [1, 2],
                      "nginx": {"include": ["conf/a.conf", "conf/b.conf"]},
                      "exclude": [{"concurrency": 2, "nginx": {"include": "conf/b.conf"}}]},
           "thresholds": {"rps": "<-5%", "baseline": {"nginx": {"include": "conf/a.conf"}}}}
    parsed = parse_spec(doc, str(tmp_path / "e.toml"), *spec_args)
    a, b = str(tmp_path / "conf" / "a.conf"), str(tmp_path / "conf" / "b.conf")
    assert parsed.axes["nginx.include"] == (a, b)
    assert parsed.exclude == ({"concurrency": 2, "nginx.include": b},)
    assert parsed.thresholds.baseline == (("nginx.include", a),)


def test_a_directory_is_refused_not_read(tmp_path, spec_args):
    (tmp_path / "d").mkdir()
    with pytest.raises(SpecError, match="nginx.include: .*/d: not a regular file"):
        parse_spec(spec(tmp_path, "nginx", "d"), str(tmp_path / "e.toml"), *spec_args)


def test_the_files_hash_is_recorded_with_the_versions(tmp_path):
    """A resume compares versions: an edited include is a changed run, not the same."""
    mine = write(tmp_path / "mine.conf", "add_header X-Mine yes;\n")
    nginx = COMPONENTS["nginx"]
    first = nginx.versions({"include": str(mine)})
    mine.write_text("add_header X-Mine no;\n")
    second = nginx.versions({"include": str(mine)})
    key = f"nginx.include {mine}"
    assert first[key].startswith("sha256:") and first[key] != second[key]
    assert "nginx.include" not in " ".join(nginx.versions({"include": ""}))


# real servers ----------------------------------------------------------------------------

@pytest.mark.integration
def test_nginx_include_acts_and_is_exported(session, tmp_path):
    mine = write(tmp_path / "mine.conf", "add_header X-Mine yes;\n")
    deployed = deploy("static-page", session.run_dir("docroot-static-page"))
    with running(session, "nginx", deployed, nginx__include=str(mine)) as stack:
        assert_all_pass(verify_stack(stack, deployed))
        assert fetch(stack.front.endpoint, "/index.html").headers["x-mine"] == "yes"
        configs = stack.files()
    assert configs["nginx/include.conf"] == "add_header X-Mine yes;\n"
    assert f"nginx.include: {mine} (sha256 " in configs["nginx/nginx.conf"]
    out = tmp_path / "exported"
    export_config(record(configs), "nginx", out)
    assert (out / "nginx" / "include.conf").read_text() == "add_header X-Mine yes;\n"
    exported = (out / "nginx" / "nginx.conf").read_text()
    assert "/nginx/include.conf\";" in exported and "/tmp/stacklab-" not in exported


@pytest.mark.integration
def test_a_directive_nginx_refuses_in_the_runs_config_stops_the_start(session, tmp_path):
    """The file alone passes (ssl_session_tickets once is fine); with nginx.tls on the
    server block already has one, and nginx refuses a duplicate: no later-one-wins."""
    mine = write(tmp_path / "mine.conf", "ssl_session_tickets on;\n")
    deployed = deploy("static-page", session.run_dir("docroot-static-page"))
    stack = RunningStack(STACKS["nginx"])
    try:
        with pytest.raises(StackError) as e:
            start_stack(stack, knobs_for("nginx", nginx__include=str(mine), nginx__tls=True),
                        deployed, session.run_dir("run-dup"), make_certificate(session.dir))
    finally:
        assert stop_stack(stack) == []
    said = str(e.value)
    assert said.startswith(f"nginx.include: {mine}: the run's config test")
    assert f'"ssl_session_tickets" directive is duplicate in {mine}:1' in said
    assert not any("run-dup" in p for p in server_processes())


@pytest.mark.integration
@pytest.mark.parametrize("stack_name", ["apache", "apache+mod_php"])
def test_apache_include_acts_under_each_mpm_and_handler(session, tmp_path, stack_name):
    mine = write(tmp_path / "mine.conf", "<IfModule !headers_module>\nLoadModule "
                 "headers_module /usr/lib/apache2/modules/mod_headers.so\n</IfModule>\n"
                 'Header set X-Mine yes\nErrorDocument 404 "not here, mine"\n')
    deployed = deploy("static-page", session.run_dir("docroot-static-page"))
    with running(session, stack_name, deployed, apache__include=str(mine)) as stack:
        assert_all_pass(verify_stack(stack, deployed))
        ep = stack.front.endpoint
        assert fetch(ep, "/index.html").headers["x-mine"] == "yes"
        missing = fetch(ep, "/not-there.html")
        assert missing.status == 404 and missing.body == b"not here, mine"
        assert stack.files()["apache/include.conf"] == mine.read_text()


@pytest.mark.integration
@pytest.mark.parametrize("stack_name", ["nginx+php-fpm", "apache+mod_php", "apache+fcgid"])
def test_php_ini_extra_acts_under_every_handler(session, tmp_path, stack_name):
    mine = write(tmp_path / "mine.ini", "short_open_tag = On\nmemory_limit = 77M\n")
    deployed = deploy("php-page", session.run_dir("docroot-php-page"))
    (deployed.docroot / "mine.php").write_text(
        '<? echo "short:"; ?><?php echo ini_get("memory_limit");')
    with running(session, stack_name, deployed, php__ini_extra=str(mine)) as stack:
        verdicts = verify_stack(stack, deployed)
        assert_all_pass(verdicts)
        ini = next(v for v in verdicts if v.check == "php.ini")
        assert "2 of php.ini_extra" in ini.detail
        assert fetch(stack.front.endpoint, "/mine.php").body == b"short:77M"
        stored = next(text for name, text in stack.files().items()
                      if name.endswith("conf.d/zz-ini_extra.ini"))
    assert stored.endswith(mine.read_text()) and f"php.ini_extra: {mine}" in stored


@pytest.mark.integration
def test_php_ini_extra_against_a_knob_fails_verification(session, tmp_path):
    """A user's line that changes what a knob sets is not what the knob says: FAIL."""
    mine = write(tmp_path / "mine.ini", "expose_php = On\n")
    deployed = deploy("php-page", session.run_dir("docroot-php-page"))
    with running(session, "nginx+php-fpm", deployed, php__ini_extra=str(mine)) as stack:
        got = statuses(verify_stack(stack, deployed))
    assert got["php:php.ini"] == "FAIL"


@pytest.mark.integration
def test_mariadb_cnf_extra_wins_and_a_knob_it_overrides_fails(session, tmp_path):
    mine = write(tmp_path / "mine.cnf", "wait_timeout = 1234\nmax_connections = 77\n")
    deployed = replace(deploy("app-index", session.run_dir("docroot-app-index"), seed=5),
                       database=AppDatabase(5, articles=100))
    with running(session, "nginx+php-fpm+mariadb", deployed,
                 mariadb__cnf_extra=str(mine)) as stack:
        db = next(s for s in stack.started if s.name == "mariadb")
        assert query(db.endpoint.unix, "SELECT @@wait_timeout, @@max_connections") == \
            [["1234", "77"]]
        verdicts = verify_stack(stack, deployed)
        configs = stack.files()
    settings = next(v for v in verdicts if v.check == "settings")
    assert settings.status is Status.FAIL and "max_connections = 77 (wanted 151)" in \
        settings.detail
    assert configs["mariadb/cnf_extra.cnf"].endswith(mine.read_text())
    assert f"!include {db.ctx.run_dir / 'cnf_extra.cnf'}" in configs["mariadb/my.cnf"]


def record(configs: dict[str, str]) -> RunRecord:
    return RunRecord(experiment_id=1, trial_id="t", repetition=1, outcome="ok",
                     started_at="s", ended_at="e", knobs={}, versions={}, configs=configs)


# what an include may write: only inside the run directory --------------------------------

OUTSIDE = {   # a directive writing to {out}, a file outside the lab, per server
    "nginx": ["error_log {out};\n", "access_log {out};\n",
              "location /x {{\n    access_log '{out}' combined;\n}}\n",
              "client_body_temp_path ../../{name};\n", "include /etc/nginx/mime.types;\n"],
    "apache": ["ErrorLog {out}\n", 'CustomLog "{out}" common\n',
               'CustomLog "|/bin/touch {out}" common\n', "TransferLog \\\n  {out}\n",
               "Mutex file:{dir} default\n", "IncludeOptional /etc/apache2/conf-enabled/*.conf\n"],
    "php": ["error_log = {out}\n", 'session.save_path = "{dir}"\n'],
    "mariadb": ["log_error = {out}\n", "general-log-file={out}\n", "loose-pid-file = {out}\n"],
}


@pytest.mark.parametrize("owner, line", [(o, t) for o, texts in OUTSIDE.items()
                                         for t in texts])
def test_an_include_that_writes_outside_the_lab_is_refused_before_any_test_runs(
        tmp_path, spec_args, owner, line):
    """Servers and their config tests run as root: `nginx -t` created an include's
    error_log outside the lab at spec time, even under --dry-run."""
    out = tmp_path / "outside" / "written.log"
    out.parent.mkdir()
    write(tmp_path / "mine.conf", line.format(out=out, dir=out.parent, name=out.name))
    with pytest.raises(SpecError) as e:
        parse_spec(spec(tmp_path, owner, "mine.conf"), str(tmp_path / "e.toml"), *spec_args)
    problem = e.value.problem
    at = 2 if line.startswith("location") else 1       # the directive's own line
    assert problem.startswith(f"{owner}.{KNOBS[owner]}: line {at}: "), problem
    assert "run directory" in problem and "\n" not in str(e.value)
    assert list(out.parent.iterdir()) == []


@pytest.mark.parametrize("owner, text", [
    ("nginx", "access_log mine.log;\nerror_log stderr;\naccess_log off;\n"
              "# error_log /var/log/x.log;\nadd_header X-Log \"/var/log/x.log\";\n"),
    ("apache", "ErrorLog mine.log\n# ErrorLog /var/log/x.log\nErrorLog syslog:local1\n"),
    ("php", "error_log = /dev/null\n; error_log = /var/log/x.log\n"),
    ("mariadb", "log_error = mine.err\n# log_error = /var/log/x.err\n"),
])
def test_a_relative_path_a_sink_or_a_comment_is_accepted(tmp_path, spec_args, owner, text):
    write(tmp_path / "mine.conf", text)
    parse_spec(spec(tmp_path, owner, "mine.conf"), str(tmp_path / "e.toml"), *spec_args)


@pytest.mark.parametrize("owner, text", [
    ("nginx", "add_header X-A a\x0b#;\nerror_log {out};\n"),     # a VT is no space to nginx
    ("apache", "CustomLog syslog/../../../../../../../../..{out} common\n"),
    ("apache", 'CustomLog "logs/x(/../../../../../../../../..{out}" common\n'),
    ("apache", "ScriptSock {out}\n"),
    ("mariadb", "log_slow_query_file = {out}\n"),
    ("mariadb", "general_log_fi = {out}\n"),                   # a prefix MariaDB takes
    ("mariadb", "!include {out}\n"),
])
def test_what_a_review_got_past_the_scanner_is_refused(tmp_path, spec_args, owner, text):
    out = tmp_path / "outside" / "written.log"
    out.parent.mkdir()
    write(tmp_path / "mine.conf", text.format(out=out))
    with pytest.raises(SpecError) as e:
        parse_spec(spec(tmp_path, owner, "mine.conf"), str(tmp_path / "e.toml"), *spec_args)
    assert "\n" not in str(e.value)
    assert list(out.parent.iterdir()) == []
