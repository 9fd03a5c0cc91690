"""The engine's HTTP/2 against real nginx: h2c by prior knowledge and h2 over TLS (ALPN),
with several streams per connection; every response counted with its exact body, the
report's protocol the one that came back, a server that does not speak HTTP/2 failing
every request (never measured as if it did), and a server's GOAWAY after its request
limit costing no request."""

import json
import subprocess

import jsonschema
import pytest

from stacklab.measure.drive import REPO_ENGINE
from stacklab.stacks.tls import make_certificate

from helpers import ROOT, free_port, private_nginx, require_engine

SCHEMA = json.loads((ROOT / "engine" / "schema" / "report.schema.json").read_text())
PAGE = 600
BIG = 100 * 1024


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    """A private nginx with four listeners: HTTP/1.1, h2c, h2 over TLS, and TLS without
    HTTP/2; its h2c listener closes a connection (GOAWAY) after 100 requests."""
    base = tmp_path_factory.mktemp("nginx-h2")
    cert, key = make_certificate(base)
    ports = {name: free_port() for name in ("http1", "h2c", "h2", "tls1")}
    tls = f"ssl_certificate {cert}; ssl_certificate_key {key};"
    with private_nginx(base, f"""
    server {{ listen 127.0.0.1:{ports['http1']}; }}
    server {{ listen 127.0.0.1:{ports['h2c']} http2; keepalive_requests 100; }}
    server {{ listen 127.0.0.1:{ports['h2']} ssl http2; {tls} }}
    server {{ listen 127.0.0.1:{ports['tls1']} ssl; {tls} }}""", ports.values()) as www:
        (www / "page.html").write_bytes(b"p" * PAGE)
        (www / "big.html").write_bytes(b"b" * BIG)
        yield ports


def engine(*args: str) -> tuple[int, dict]:
    require_engine()
    out = subprocess.run([str(REPO_ENGINE), "--json", *args], capture_output=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    doc = json.loads(out.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    return out.returncode, doc


@pytest.mark.integration
def test_h2c_streams_carry_every_response_whole(nginx):
    code, doc = engine("--protocol", "h2c", "--streams", "4", "-c", "3", "--threads", "1",
                       "-n", "600", f"http://127.0.0.1:{nginx['h2c']}/page.html")
    assert code == 0 and doc["protocol"] == "h2c" and doc["requests"]["failed"] == 0
    assert doc["requests"]["completed"] == doc["status"]["200"] == 600
    assert doc["bytes"]["body"] == 600 * PAGE
    assert doc["bytes"]["total"] > doc["bytes"]["body"]        # frames and headers too
    # each stream is a virtual client: 3 connections x 4 streams, all served
    assert doc["connections"]["slots"] == 12 and doc["connections"]["idle_slots"] == 0
    assert doc["config"]["protocol"] == "h2c" and doc["config"]["streams"] == 4


@pytest.mark.integration
def test_h2_over_tls_is_chosen_by_alpn(nginx):
    code, doc = engine("--protocol", "h2", "--streams", "8", "-c", "2", "--insecure",
                       "-n", "200", f"https://127.0.0.1:{nginx['h2']}/big.html")
    assert code == 0 and doc["protocol"] == "h2" and doc["tls"]["alpn"] == "h2"
    assert doc["requests"]["completed"] == 200 and doc["bytes"]["body"] == 200 * BIG
    assert doc["tls"]["handshakes"] == doc["connections_opened"] == 2


@pytest.mark.integration
def test_a_server_without_http2_fails_every_request_and_says_what_it_chose(nginx):
    """Over TLS the server's ALPN choice is reported; in cleartext the HTTP/1.1 answer to
    the HTTP/2 preface is no HTTP/2: nothing is counted as a response."""
    code, doc = engine("--protocol", "h2", "-c", "2", "--insecure", "-n", "20",
                       f"https://127.0.0.1:{nginx['tls1']}/page.html")
    assert code == 3 and doc["protocol"] is None and doc["tls"]["alpn"] == "http/1.1"
    assert doc["requests"]["completed"] == 0 and doc["requests"]["errors"]["tls"] == 20
    code, doc = engine("--protocol", "h2c", "-c", "2", "-n", "20",
                       f"http://127.0.0.1:{nginx['http1']}/page.html")
    assert code == 3 and doc["protocol"] is None and doc["requests"]["completed"] == 0


@pytest.mark.integration
def test_a_goaway_after_the_servers_request_limit_costs_no_request(nginx):
    """nginx ends an HTTP/2 connection after keepalive_requests (100 here) with GOAWAY;
    requests it refused unprocessed go again on a new connection, uncounted as errors."""
    code, doc = engine("--protocol", "h2c", "--streams", "10", "-c", "2", "--threads", "1",
                       "-n", "2000", f"http://127.0.0.1:{nginx['h2c']}/page.html")
    assert code == 0 and doc["requests"]["failed"] == 0
    assert doc["requests"]["completed"] == 2000
    assert doc["connections_opened"] >= 2000 // 100


@pytest.mark.integration
def test_h2c_open_loop_keeps_its_rate(nginx):
    code, doc = engine("--protocol", "h2c", "--streams", "5", "-c", "4", "--rate", "2000",
                       "-d", "2s", f"http://127.0.0.1:{nginx['h2c']}/page.html")
    assert code == 0 and doc["protocol"] == "h2c" and doc["requests"]["failed"] == 0
    assert doc["rps"] == pytest.approx(2000, rel=0.05)
    assert doc["config"]["rate"] == 2000


@pytest.mark.integration
def test_http1_reports_its_protocol(nginx):
    code, doc = engine("-c", "2", "-n", "50", f"http://127.0.0.1:{nginx['http1']}/page.html")
    assert code == 0 and doc["protocol"] == "http/1.1" and doc["config"]["streams"] == 1
