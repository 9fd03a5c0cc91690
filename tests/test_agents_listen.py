"""--agents-listen's address (issue 38): loopback unless the user passes --allow-remote
(decided on the text, nothing looked up: Dask's scheduler is unauthenticated), and an
address the scheduler cannot listen at refused in one line naming the flag and the
value, before the experiment is created, never as a traceback."""

import os
import shutil
import socket
import subprocess

import dask
import pytest
from typer.testing import CliRunner

from stacklab.agents.pool import DASK, AgentPool
from stacklab.agents.rules import check_bindable, check_listen
from stacklab.cli import cli
from stacklab.errors import EngineError, UsageError
from stacklab.host.net import free_port

EXTERNAL = """
[experiment]
name = "agents-listen"
repetitions = 1
duration = "1s"
remeasure = 0
keep_cpus_awake = false

[load]
agents = 2

[external]
url = "http://127.0.0.1:9/"

[matrix]
concurrency = [4]
"""

LOOPBACK = ["127.0.0.1:8786", "127.1.2.3:8786", "[::1]:8786", "localhost:8786",
            "LocalHost:8786"]
REMOTE = ["0.0.0.0:8786", "192.0.2.10:8786", "128.0.0.1:8786", "[::]:8786",
          "[2001:db8::10]:8786", "[::ffff:127.0.0.1]:8786", "example.com:8786",
          "localhost.example.com:8786", "127.0.0.1.example.com:8786"]


@pytest.fixture
def no_lookup(monkeypatch):
    """Any name lookup fails the test: loopback is decided on the text."""
    def looked_up(*args, **kwargs):
        raise AssertionError(f"looked up {args[0]!r}")
    monkeypatch.setattr(socket, "getaddrinfo", looked_up)
    monkeypatch.setattr(socket, "gethostbyname", looked_up)


@pytest.mark.parametrize("value", LOOPBACK)
def test_loopback_needs_no_flag(no_lookup, value):
    assert check_listen(value) == value


@pytest.mark.parametrize("value", REMOTE)
def test_any_other_address_needs_allow_remote(no_lookup, value):
    with pytest.raises(UsageError) as e:
        check_listen(value)
    said = str(e.value)
    assert said.startswith(f"--agents-listen {value!r} is not a loopback address")
    assert "unauthenticated" in said and "--allow-remote" in said
    assert check_listen(value, allow_remote=True) == value


@pytest.mark.parametrize("value, said", [
    ("nowhere", "expected HOST:PORT"),
    (":8786", "expected HOST:PORT"),
    ("127.0.0.1:99999", "expected HOST:PORT"),
    ("127.0.0.1:0", "expected HOST:PORT"),
    ("::1:8786", "an IPv6 address goes in brackets, [::1]:8786"),
    ("[127.0.0.1]:8786", "only an IPv6 address goes in brackets"),
    ("[localhost]:8786", "only an IPv6 address goes in brackets"),
    ("a" * 300 + ":8786", "(300 characters before the :PORT): not a host name"),
    ("a" * 64 + ".example:8786", "not a host name"),
    ("bad host:8786", "not a host name"),
    ("user@host:8786", "not a host name"),
])
def test_what_is_no_address_is_said_without_a_lookup(no_lookup, value, said):
    with pytest.raises(UsageError, match="^--agents-listen ") as e:
        check_listen(value, allow_remote=True)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_the_longest_name_is_a_name():
    name = ".".join(["a" * 63] * 3 + ["b" * 61])          # 253 characters
    assert check_listen(f"{name}:8786", allow_remote=True) == f"{name}:8786"
    with pytest.raises(UsageError, match="not a host name"):
        check_listen(f"{name}b:8786", allow_remote=True)


def test_a_port_in_use_is_refused_before_the_scheduler_starts():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(UsageError, match="another program listens on that port"):
            check_bindable(address)
    check_bindable(address)         # let go: free again


@pytest.mark.parametrize("address, said", [
    ("192.0.2.10:8786", "not an address of this host"),
    ("no-such-host.invalid:8786", "cannot listen there"),
])
def test_an_address_not_of_this_host_is_refused(address, said):
    with pytest.raises(UsageError, match=f"^--agents-listen '{address}': ") as e:
        check_bindable(address)
    assert said in str(e.value)


def test_ipv6_loopback_in_brackets_is_listened_at():
    """[::1] as the user writes it: checked, bound, and the scheduler listens there (no
    worker joins here: the wait times out, saying so)."""
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        port = s.getsockname()[1]
    address = check_listen(f"[::1]:{port}")
    check_bindable(address)
    said = []
    with pytest.raises(EngineError, match=r"1 load agent\(s\) asked, 0 joined within 1 s"):
        AgentPool.external(address, 1, 1.0, said.append)
    assert f"tcp://[::1]:{port}" in said[0]


def test_the_scheduler_failing_to_listen_is_one_line_naming_the_flag():
    """A port taken between the check and the scheduler's start: the same kind of line,
    not distributed's traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(EngineError, match=f"^--agents-listen {address}: the scheduler "
                           "cannot listen there: .*Address already in use"):
            AgentPool.external(address, 1, 1.0)



def test_with_dask_tls_settings_only_a_worker_with_the_certificate_joins(tmp_path):
    """The manual's way (docs/load.md) to restrict the scheduler beyond loopback and a firewall: Dask's
    own settings (distributed.comm.require-encryption, distributed.comm.tls.*) make it
    listen on tls://, say the worker's TLS flags, let in a worker that has the
    certificate and not one that connects without it."""
    if not shutil.which("openssl"):
        pytest.fail("openssl is not installed (Debian's openssl package)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-nodes", "-newkey", "rsa:2048", "-days", "1",
                    "-subj", "/CN=stacklab-test", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    port, none = free_port(), tmp_path / "no-dask-config"
    none.mkdir()
    env = os.environ | {"DASK_CONFIG": str(none)}     # the workers: their flags alone
    common = ["--nthreads", "1", "--no-nanny", "--no-dashboard", "--death-timeout", "5"]
    workers = [
        subprocess.Popen([str(DASK), "worker", f"tls://127.0.0.1:{port}", "--name",
                          "with-cert", *common, "--tls-ca-file", str(cert),
                          "--tls-cert", str(cert), "--tls-key", str(key)],
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL),
        subprocess.Popen([str(DASK), "worker", f"tcp://127.0.0.1:{port}", "--name",
                          "without", *common], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    tls = {"distributed.comm.require-encryption": True,
           "distributed.comm.tls.ca-file": str(cert)}
    for role in ("scheduler", "client"):
        tls |= {f"distributed.comm.tls.{role}.cert": str(cert),
                f"distributed.comm.tls.{role}.key": str(key)}
    said: list[str] = []
    try:
        with dask.config.set(tls):
            pool = AgentPool.external(f"127.0.0.1:{port}", 1, 60, said.append)
            try:
                workers[1].wait(timeout=30)      # gave up: never let in
                assert sorted(pool._workers()) == ["with-cert"]
            finally:
                pool.close()
    finally:
        for w in workers:
            w.kill()
            w.wait()
    assert f"at tls://127.0.0.1:{port}" in said[0]
    assert "--tls-ca-file CA --tls-cert CERT --tls-key KEY" in said[0]

def run(tmp_path, *argv):
    spec = tmp_path / "ext.toml"
    spec.write_text(EXTERNAL)
    return CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                    *argv])


def test_listening_on_every_interface_needs_allow_remote(tmp_path):
    result = run(tmp_path, "--dry-run", "--agents-listen", "0.0.0.0:8786")
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert "--agents-listen '0.0.0.0:8786' is not a loopback address" in line
    assert "pass --allow-remote" in line


@pytest.mark.parametrize("value, said", [
    ("192.0.2.10:{port}", "not an address of this host"),
    ("no-such-host.invalid:{port}", "cannot listen there"),
    ("127.0.0.1:{taken}", "another program listens on that port"),
    ("::1:{port}", "an IPv6 address goes in brackets"),
    ("a" * 300 + ":{port}", "not a host name"),
])
def test_an_address_the_scheduler_cannot_listen_at_is_one_line_before_anything_runs(
        tmp_path, value, said):
    """The five cases of issue 38, through the command: exit 2, one line naming the flag
    and the value, and no experiment created (nothing measured is at risk)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        value = value.format(port=8786, taken=taken.getsockname()[1])
        result = run(tmp_path, "--agents-listen", value, "--allow-remote")
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"stacklab: error: --agents-listen '{value[:40]}")
    assert said in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not (tmp_path / "r.db").exists()

