"""HAProxy in front of three real nginx replicas on loopback: it answers, verify passes
for each balance method and http_mode, the spread shows in the replicas' own counters
as well as HAProxy's, a stopped replica fails verify, and nothing is left running."""

import os
import pwd
import stat
import subprocess
from collections import Counter

import pytest

from stacklab.host import lab, procs
from stacklab.netlab.sweep import SWEEPS
from stacklab.errors import StackError, UnsafePathError
from stacklab.host.net import Endpoint
from stacklab.stacks import COMPONENTS, REGISTRY
from stacklab.stacks.base import RenderContext, free_port
from stacklab.stacks.haproxy import HAProxy
from stacklab.measure.verify import CHECK_PATH, Status, fetch
from stacklab.workloads import deploy

pytestmark = pytest.mark.integration

HAPROXY = HAProxy()
NGINX = COMPONENTS["nginx"]
ODD_DIR = 'haproxy "run" dir'    # a run directory whose path needs quoting


def haproxy_knobs(**overrides):
    return {k.name: k.default for k in HAPROXY.knobs} | overrides


@pytest.fixture(scope="module")
def lab_session():
    s = lab.open_session(sweeps=SWEEPS)
    yield s
    s.close()


@pytest.fixture(scope="module")
def deployed(lab_session):
    return deploy("static-page", lab_session.run_dir("docroot"))


def start_nginx(session, deployed, name):
    user, group = lab.server_user()
    ctx = RenderContext(session.run_dir(name), deployed.docroot, "127.0.0.1", free_port(),
                        user, group)
    return NGINX.start(ctx, REGISTRY.defaults("nginx"))


def stop_all(*started):
    for s in started:
        {"haproxy": HAPROXY, "nginx": NGINX}[s.name].stop(s)
    assert all(procs.group_members(s.proc.pgid) == [] for s in started)


@pytest.fixture(scope="module")
def replicas(lab_session, deployed):
    """Three nginx replicas, shared by the tests that leave them running."""
    started = [start_nginx(lab_session, deployed, f"nginx{i}") for i in range(3)]
    yield started
    stop_all(*started)


def start_haproxy(session, backends, name=ODD_DIR, **overrides):
    """HAProxy in a run directory of its own (`name` and a number)."""
    user, group = lab.server_user()
    run_dir = session.run_dir(f"{name} {len(list(session.dir.iterdir()))}")
    ctx = RenderContext(run_dir, session.dir, "127.0.0.1", free_port(),
                        user, group, backends=tuple(b.endpoint for b in backends))
    return HAPROXY.start(ctx, haproxy_knobs(**overrides))


@pytest.mark.parametrize("overrides", [
    {},
    {"balance": "static-rr", "weights": "1,2,1", "http_mode": "close", "nbthread": 2},
    {"balance": "roundrobin", "weights": "3,1,2", "http_mode": "server-close",
     "server_maxconn": 8, "nbthread": 2},
    {"balance": "leastconn", "maxconn": 256},
], ids=["defaults", "static-rr-close", "weighted-rr-server-close", "leastconn"])
def test_balances_verifies_and_stops(lab_session, replicas, overrides):
    started = start_haproxy(lab_session, replicas, **overrides)
    try:
        assert fetch(started.endpoint, "/index.html").body == \
            fetch(replicas[0].endpoint, "/index.html").body
        before = HAPROXY.counters(started)
        verdicts = HAPROXY.verify(started, started)
        after = HAPROXY.counters(started)
        uids = [os.stat(f"/proc/{pid}").st_uid for pid in procs.group_members(
            started.proc.pgid)]
        pid_file = (started.ctx.run_dir / "haproxy.pid").read_text()
        socket_mode = stat.S_IMODE(os.stat(started.ctx.run_dir / "haproxy.sock").st_mode)
    finally:
        stop_all(started)
    assert [v.status for v in verdicts] == [Status.PASS] * 4, verdicts
    assert [v.check for v in verdicts] == ["backends up", "spread", "http_mode clients",
                                           "http_mode backends"]
    clients = 1 if started.knobs["http_mode"] == "close" else 2   # no 2nd on a closed one
    sent = verdicts[1].data["sent"] + clients + 2 * len(replicas)
    assert after["requests"] - before["requests"] == sent
    assert sum(after[f"backend:{i}"] - before[f"backend:{i}"] for i in range(3)) == sent
    assert len(uids) == HAPROXY.processes(started.knobs)
    assert pid_file == f"{started.proc.pgid}\n"     # the master's: the process we started
    assert socket_mode == 0o600
    if started.ctx.user:     # the worker drops to the server user, the master stays root
        assert sorted(uids) == sorted([0, pwd.getpwnam(started.ctx.user).pw_uid])


def test_weights_spread_requests_as_the_replicas_own_counters_show(lab_session, replicas):
    """static-rr with weights 1,2,1: 16 requests are 4, 8 and 4 by nginx's stub_status
    (each reading counts itself) and by HAProxy's per-server counters; and /_stacklab/
    is the replicas' (their status page answers through HAProxy)."""
    started = start_haproxy(lab_session, replicas, "haproxy-weights", balance="static-rr",
                            weights="1,2,1")
    try:
        own = [NGINX.counters(r)["requests"] for r in replicas]
        counted = HAPROXY.counters(started)
        statuses = Counter(fetch(started.endpoint, CHECK_PATH).status for _ in range(16))
        own = [NGINX.counters(r)["requests"] - n - 1 for r, n in zip(replicas, own)]
        after = HAPROXY.counters(started)
        status_page = fetch(started.endpoint, "/_stacklab/nginx-status")
    finally:
        stop_all(started)
    assert statuses == Counter({200: 16})
    assert own == [4, 8, 4]
    assert [after[f"backend:{i}"] - counted[f"backend:{i}"] for i in range(3)] == [4, 8, 4]
    assert after["requests"] - counted["requests"] == 16
    assert HAPROXY.shares(started.knobs, 3) == [0.25, 0.5, 0.25]
    assert status_page.status == 200 and b"Active connections" in status_page.body


def test_a_stopped_replica_fails_verify_and_answers_503(lab_session, deployed):
    """No health checks: HAProxy keeps sending the dead replica its turn, which ends in
    a 503 after its 3 retries (econ, wretr); verify names it and checks nothing else."""
    alive, dead = (start_nginx(lab_session, deployed, f"nginx-{n}") for n in ("a", "b"))
    started = start_haproxy(lab_session, [alive, dead], "haproxy-dead")
    try:
        NGINX.stop(dead)
        before = HAPROXY.counters(started)
        verdicts = HAPROXY.verify(started, started)
        statuses = Counter(fetch(started.endpoint, CHECK_PATH).status for _ in range(2))
        after = HAPROXY.counters(started)
    finally:
        stop_all(started, alive)
    [v] = verdicts
    assert v.check == "backends up" and v.status is Status.FAIL
    assert v.detail.startswith("1 of 2 backends do not answer /_stacklab/check.html: "
                               f"b1 (127.0.0.1:{dead.endpoint.port}): ConnectionRefused")
    assert statuses == Counter({200: 1, 503: 1})
    delta = {k: after[k] - before[k] for k in ("econ", "wretr", "hrsp_5xx", "backend:1")}
    assert delta == {"econ": 1, "wretr": 3, "hrsp_5xx": 1, "backend:1": 0}


def test_a_config_that_ignores_the_knobs_fails_verify(lab_session, replicas, monkeypatch):
    """The knobs say static-rr 1,2,1 and close; the config run has equal weights and
    keep-alive: the spread and both http_mode checks fail, saying what the wire showed."""
    real = HAProxy.render

    def render(self, ctx, knobs):
        text = real(self, ctx, knobs)["haproxy.cfg"]
        return {"haproxy.cfg": text.replace("weight 2", "weight 1").replace(
            "option httpclose", "option http-keep-alive")}

    monkeypatch.setattr(HAProxy, "render", render)
    started = start_haproxy(lab_session, replicas, "haproxy-lying", balance="static-rr",
                            weights="1,2,1", http_mode="close")
    try:
        verdicts = {v.check: v for v in HAPROXY.verify(started, started)}
    finally:
        stop_all(started)
    assert {c: v.status for c, v in verdicts.items()} == {
        "backends up": Status.PASS, "spread": Status.FAIL,
        "http_mode clients": Status.FAIL, "http_mode backends": Status.FAIL}
    assert "exactly 4, 8, 4 expected" in verdicts["spread"].detail
    assert sorted(verdicts["spread"].data["per_backend"]) == [5, 5, 6]
    clients = verdicts["http_mode clients"].detail
    assert "the second request reused the connection" in clients
    assert verdicts["http_mode backends"].data["reuse"] > 0


BACKENDS = (Endpoint("127.0.0.1", 8081), Endpoint("127.0.0.1", 0, unix="/run/b 1.sock"),
            Endpoint("127.0.0.1", 8443, scheme="https"))


def render(run_dir, backends=BACKENDS, **overrides):
    ctx = RenderContext(run_dir, run_dir, "127.0.0.1", 8080, "www-data", "www-data",
                        backends=backends)
    return HAPROXY.render(ctx, haproxy_knobs(**overrides))["haproxy.cfg"]


def test_rendered_config_quotes_paths_and_passes_haproxys_check(lab_session):
    run_dir = lab_session.run_dir(ODD_DIR)
    text = render(run_dir, balance="static-rr", weights="2,1,1", server_maxconn=32,
                  http_mode="server-close")
    quoted = str(run_dir).replace('"', '\\"')
    assert f'stats socket "{quoted}/haproxy.sock" mode 600 level user' in text
    assert f'pidfile "{quoted}/haproxy.pid"' in text
    assert "    option http-server-close\n" in text and "balance static-rr" in text
    assert text.endswith(
        "    server b0 127.0.0.1:8081 weight 2 maxconn 32\n"
        '    server b1 "unix@/run/b 1.sock" weight 1 maxconn 32\n'
        "    server b2 127.0.0.1:8443 weight 1 maxconn 32 ssl verify none\n")
    (run_dir / "haproxy.cfg").write_text(text)
    result = subprocess.run([HAPROXY.binary, "-c", "-f", str(run_dir / "haproxy.cfg")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("weights, problem", [
    ("1,x,1", "haproxy.weights: weights '1,x,1' must be whole numbers 1..256 separated "
              "by commas"),
    ("1,0", "haproxy.weights: weights '1,0' must be whole numbers 1..256 separated by "
            "commas"),
    ("257", "haproxy.weights: weights '257' must be whole numbers 1..256 separated by "
            "commas"),
    ("1,2,1", None), ("", None),
])
def test_check_refuses_weights_that_are_not_a_list_of_weights(weights, problem):
    assert HAPROXY.check(haproxy_knobs(weights=weights)) == problem


def test_render_refuses_what_the_backends_cannot_match(tmp_path):
    with pytest.raises(StackError, match=r"haproxy.weights = '1,2' gives 2 weights for 3 "
                                         r"backends"):
        render(tmp_path, weights="1,2")
    with pytest.raises(StackError, match="needs at least one backend"):
        render(tmp_path, backends=())
    with pytest.raises(StackError, match=r"contains '\$'"):
        render(tmp_path / "$HOME")
    # outside a lab session there is no short socket directory to fall back on
    with pytest.raises(UnsafePathError, match="over the 95 bytes haproxy can bind"):
        render(tmp_path / ("x" * 100))
