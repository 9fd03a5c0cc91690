"""`stacklab breakdown --network veth`: S1's network share (the total over a veth link
minus the total on loopback, the link's RTT beside it). The arithmetic and the layout
from fixed figures, the refusals before anything starts, and a real breakdown of nginx
through the CLI in-process that leaves no namespace behind."""

import io
import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console
from typer.testing import CliRunner

from stacklab.methods import breakdown
from stacklab.methods.breakdown import (LINKS, NETWORK_NOTE, VETH_NOTE, _combined, plan_breakdown,
                                shares)
from stacklab.cli import cli
from stacklab.errors import ExitStatus, UsageError
from stacklab.report.measures import breakdown_lines, breakdown_tables
from stacklab.store import Store

from helpers import assert_golden, require_engine, require_root
from test_breakdown import leftovers

SCHEMA = (Path(__file__).parent.parent / "stacklab" / "report" / "schemas" /
          "breakdown.schema.json")


# the arithmetic --------------------------------------------------------------------

@pytest.mark.parametrize("total, db, php, network", [(3.2, 0.86, 0.68, 0.3),
                                                     (0.07, None, None, 0.04),
                                                     (2.5, 0.9, 1.7, -0.2)])
def test_shares_over_veth_add_up_to_the_total_over_veth(total, db, php, network):
    rows = shares(total, db, php, "nginx", network, 0.021)
    assert sum(r["ms"] for r in rows) == pytest.approx(total + network)
    assert sum(r["percent"] for r in rows) == pytest.approx(100)
    web = next(r for r in rows if r["component"] == "web server (nginx)")
    assert web["ms"] == pytest.approx(total - (db or 0) - (php or 0))   # from loopback
    assert rows[-1] == {"component": "network", "ms": network,
                        "percent": pytest.approx(100 * network / (total + network)),
                        "rtt_ms": 0.021, "note": VETH_NOTE}


def test_without_veth_the_network_row_stays_empty():
    assert shares(1.0, None, None, "nginx")[-1] == {
        "component": "network", "ms": None, "percent": None, "note": NETWORK_NOTE}


def figures(total, timing=None):
    return {"keepalive": True, "completed": 20, "failed": 0, "total_ms": total,
            "ttfb_ms": total, "connect_ms": None, "server_timing": timing}


def test_a_veth_total_below_the_loopback_one_is_said_not_clamped():
    m = _combined(figures(0.5), figures(0.4), "nginx", 0.02)
    assert m["network_ms"] == pytest.approx(-0.1)
    assert m["flags"] == ["veth-faster-than-loopback"]
    assert m["veth"]["total_ms"] == 0.4 and "keepalive" not in m["veth"]
    assert _combined(figures(0.5), None, "nginx", None)["network_ms"] is None


# the layout ------------------------------------------------------------------------

def measurement(keepalive, total, veth_total, db, php):
    timing = {"samples": 50, "db_ms": db, "php_ms": php}
    here = dict(figures(total, timing), keepalive=keepalive,
                connect_ms=None if keepalive else 0.042)
    there = dict(figures(veth_total, timing), connect_ms=None if keepalive else 0.061)
    return _combined(here, there, "nginx", 0.021)


VETH = {"schema_version": 2, "stack": "nginx+php-fpm+mariadb", "workload": "app-show",
        "front": "nginx", "requests": 20, "timing_samples": 50,
        "network": {"mode": "veth", "link": "100mbit", "server_addr": "198.18.0.1",
                    "client_addr": "198.18.0.2", "rate_bytes_s": 11_960_000, "rtt_ms": 0.021,
                    "sysctls": {}, "crossed": {}},
        "network_ms": {"keepalive_off": 0.3, "keepalive_on": 0.1},
        "network_note": VETH_NOTE,
        "urls": [{"path": "/showArticle.php?show=1", "measurements": [
            measurement(False, 3.2, 3.5, 0.86, 0.68),
            measurement(True, 2.5, 2.6, 0.9, 0.7)]}]}


def test_a_veth_breakdown_as_the_terminal_shows_it():
    out = Console(file=io.StringIO(), width=120, color_system=None)
    for item in [*breakdown_tables(VETH, "breakdown 2: nginx+php-fpm+mariadb app-show"),
                 *breakdown_lines(VETH)]:
        out.print(item, highlight=False, soft_wrap=isinstance(item, str))
    text = out.file.getvalue()
    assert "network (RTT 0.021 ms)" in text and "total on loopback" in text
    assert "network 0.30 ms (9%; RTT 0.021 ms)" in text
    assert_golden("breakdown-veth.txt", text)


# refusals, before anything starts ----------------------------------------------------

@pytest.mark.parametrize("args, named", [
    (["--network", "wifi"], "--network 'wifi'"),
    (["--network", "veth", "--link", "56kbit"], "--link '56kbit'"),
    (["--link", "1gbit"], "--link 1gbit: acts only with --network veth"),
    (["--network", "loopback", "--link", "100mbit"], "--link 100mbit"),
    (["--knob", "net.link=1gbit"], "--knob net.link=1gbit"),
])
def test_bad_network_values_are_one_line_naming_the_flag(tmp_path, args, named):
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["breakdown", "nginx", "static-page", *args,
                                      "--db", str(db)])
    assert result.exit_code == ExitStatus.BAD_INPUT, result.output
    assert result.output.startswith(f"stacklab: error: {named}"), result.output
    assert result.output.count("\n") == 1 and not db.exists()


def test_veth_without_root_is_refused_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(breakdown.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(breakdown, "run_breakdowns",
                        lambda *a: pytest.fail("started without root"))
    with pytest.raises(UsageError, match="^--network veth: .*needs root"):
        plan_breakdown("nginx", "static-page", [], 10, network="veth")
    result = CliRunner().invoke(cli, ["breakdown", "nginx", "static-page", "--network",
                                      "veth", "--db", str(tmp_path / "r.db")])
    assert result.exit_code == ExitStatus.BAD_INPUT
    assert result.output.count("\n") == 1 and "needs root" in result.output


def test_veth_measures_the_same_knobs_again_over_the_link():
    require_root("a veth plan is checked as a run's is")
    assert {"unlimited", "1gbit", "100mbit"} <= set(LINKS)     # net.link's values
    loopback, veth = plan_breakdown("nginx", "static-page", [], 10, network="veth",
                                    link="100mbit").passes()
    assert loopback["net"]["mode"] == "loopback"
    assert (veth["net"]["mode"], veth["net"]["link"]) == ("veth", "100mbit")
    assert {k: v for k, v in veth.items() if k != "net"} == \
        {k: v for k, v in loopback.items() if k != "net"}
    assert len(plan_breakdown("nginx", "static-page", [], 10).passes()) == 1


# a real breakdown over veth ------------------------------------------------------

def lab_namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.startswith("stacklab-")}


@pytest.mark.integration
def test_breakdown_of_a_static_page_over_veth_through_the_cli(tmp_path):
    require_root("network namespaces")
    require_engine()
    before, home = lab_namespaces(), os.readlink("/proc/thread-self/ns/net")
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["breakdown", "nginx", "static-page", "--network",
                                      "veth", "--requests", "20", "--repetitions", "1",
                                      "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "network (RTT " in result.output and "total over veth" in result.output
    assert "1/2" in result.output or "2/2" in result.output    # progress: loopback, veth
    store = Store.open(db)
    try:
        doc = store.breakdown(1).result
    finally:
        store.close()
    net = doc["network"]
    assert doc["schema_version"] == 3 and net["mode"] == "veth" and net["link"] == "unlimited"
    assert net["rtt_ms"] > 0 and net["rate_bytes_s"] > 0
    # the engine's requests crossed the link (the loopback stack's did not)
    assert net["crossed"]["client"]["rx_bytes"] == net["crossed"]["server"]["tx_bytes"] > 0
    assert set(doc["network_ms"]) == {"keepalive_off", "keepalive_on"}
    for m in doc["urls"][0]["measurements"]:
        assert m["completed"] == m["veth"]["completed"] == 20
        assert isinstance(m["network_ms"], float)
        assert m["network_ms"] == pytest.approx(m["veth"]["total_ms"] - m["total_ms"])
        row = m["shares"][-1]
        assert (row["component"], row["ms"], row["rtt_ms"]) == ("network", m["network_ms"],
                                                                net["rtt_ms"])
        assert sum(r["ms"] for r in m["shares"]) == pytest.approx(m["veth"]["total_ms"])
        assert f"RTT {net['rtt_ms']:.3f} ms" in result.output
    assert json.dumps(doc)                          # plain data
    shown = CliRunner().invoke(cli, ["breakdown", "--show", "1", "--json", "--db", str(db)])
    summary = json.loads(shown.output)
    jsonschema.validate(summary, json.loads(SCHEMA.read_text()))
    assert (summary["network"], summary["link"]) == ("veth", "unlimited")
    network = summary["urls"][0]["measurements"][0]["shares"][-1]
    assert network["rtt_ms"]["values"] == [net["rtt_ms"]]
    # nothing of the lab's network is left, and this thread is back in the host's
    assert lab_namespaces() <= before
    assert not [ns for ns in lab_namespaces() if ns.startswith(f"stacklab-s-{os.getpid()}-")]
    assert os.readlink("/proc/thread-self/ns/net") == home
    assert leftovers() == []
