"""Stack expressions: front layers in front of a named stack, replicas behind a balancer;
one spelling per stack (trial ids), and one line naming the layer at fault."""

from types import SimpleNamespace

import pytest

from stacklab.stacks.compose import MAX_REPLICAS, Composition, compose

COMPONENTS = {
    "nginx": SimpleNamespace(layer=None, balances=False),
    "apache": SimpleNamespace(layer=None, balances=False),
    "mariadb": SimpleNamespace(layer=None, balances=False),
    "varnish": SimpleNamespace(layer="cache", balances=True),
    "squid": SimpleNamespace(layer="cache", balances=False),
    "haproxy": SimpleNamespace(layer="balancer", balances=True),
    "nginx-proxy": SimpleNamespace(layer="proxy", balances=True),
}
NAMED = {"nginx", "apache", "nginx+php-fpm", "apache+mod_php+mariadb"}


@pytest.mark.parametrize("text, layers, base, replicas, name", [
    ("varnish > nginx+php-fpm", ("varnish",), "nginx+php-fpm", 1, "varnish > nginx+php-fpm"),
    ("varnish>nginx+php-fpm", ("varnish",), "nginx+php-fpm", 1, "varnish > nginx+php-fpm"),
    ("haproxy > apache*3", ("haproxy",), "apache", 3, "haproxy > apache * 3"),
    ("varnish > haproxy > apache * 2", ("varnish", "haproxy"), "apache", 2,
     "varnish > haproxy > apache * 2"),
    ("  squid  >  apache+mod_php+mariadb ", ("squid",), "apache+mod_php+mariadb", 1,
     "squid > apache+mod_php+mariadb"),
    ("apache * 1", (), "apache", 1, "apache"),
])
def test_expressions_and_their_one_spelling(text, layers, base, replicas, name):
    c = compose(text, COMPONENTS, NAMED)
    assert c == Composition(layers, base, replicas)
    assert c.name == name
    assert compose(c.name, COMPONENTS, NAMED) == c       # the spelling reads back


@pytest.mark.parametrize("text, message", [
    ("apache+mod_php+mariadb > squid", "squid is a front layer: it needs a stack behind it"),
    ("mariadb > nginx", "mariadb cannot sit in front of nginx: it is a stack's own server"),
    ("nginx > nginx+php-fpm", "nginx cannot sit in front of nginx+php-fpm: it is not a "
                              "cache, proxy or balancer"),
    ("nginx > nginx+php-fpm", "in front of a stack it is nginx-proxy"),
    ("nginx+php-fpm > apache", "nginx+php-fpm cannot sit in front of apache"),
    ("varnish > varnish > nginx", "varnish appears twice"),
    ("haproxy > tomcat", "unknown stack 'tomcat'"),
    ("varnish > ", "a layer is empty"),
    ("apache * 3", "replicas need a balancer in front (haproxy, nginx-proxy, varnish)"),
    ("squid > apache * 3", "squid cannot spread over 3 replicas of apache: it does not "
                           "balance"),
    ("haproxy > apache * 0", "replicas must be a whole number 1..8"),
    (f"haproxy > apache * {MAX_REPLICAS + 1}", "replicas must be a whole number"),
    ("haproxy > apache * two", "not 'two'"),
    ("haproxy > apache * ³", "not '³'"),
    ("lvs > apache * 2", "lvs is not available here: S2's balancer (IPVS) needs the "
                         "kernel's ip_vs module"),
])
def test_a_wrong_expression_names_the_layer_at_fault(text, message):
    with pytest.raises(ValueError) as e:
        compose(text, COMPONENTS, NAMED)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_named_stacks_keep_their_names_so_their_trial_ids_stay():
    """A trial's id is made from its stack's spelling: every named stack is spelled as
    before composition existed, and a composition as its canonical expression."""
    from stacklab.stacks import STACKS
    assert all(STACKS.canonical(name) == name for name in STACKS)
    assert STACKS["nginx"].layers == () and STACKS["nginx"].replicas == 1


def test_a_wrong_stack_in_the_experiment_file_is_one_line_naming_it(spec_args):
    from stacklab.errors import SpecError
    from stacklab.experiment.spec import parse_spec
    doc = {"experiment": {"name": "x", "duration": "1s"},
           "matrix": {"stack": ["nginx", "nginx > nginx"], "workload": ["static-page"],
                      "concurrency": [1]}}
    with pytest.raises(SpecError) as e:
        parse_spec(doc, "x.toml", *spec_args)
    assert "matrix.stack" in str(e.value) and "'nginx > nginx'" in str(e.value)
    assert "nginx-proxy" in str(e.value)


def test_weights_that_do_not_match_the_replicas_are_refused_before_anything_starts(
        tmp_path):
    from typer.testing import CliRunner
    from stacklab.cli import cli
    spec = tmp_path / "w.toml"
    spec.write_text('[experiment]\nremeasure = 0\nname = "w"\nrepetitions = 1\nduration = "1s"\n'
                    '[knobs]\nhaproxy.weights = "1,2"\n[matrix]\n'
                    'stack = ["haproxy > nginx * 3"]\nworkload = ["static-page"]\n'
                    'concurrency = [1]\n')
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                      "--dry-run"])
    assert result.exit_code != 0
    assert "haproxy.weights = '1,2' gives 2 weights for 3 backends" in result.output


@pytest.mark.parametrize("text, held", [
    ("haproxy > apache+mod_php+mariadb * 2", "database:mysql"),
    ("haproxy > nginx+php-fpm+memcached * 3", "sessions:memcached"),
])
def test_a_stack_holding_shared_state_is_not_replicated(text, held):
    """Each replica would have its own database or session store, which a cluster's
    nodes share: refused in one line, before anything starts."""
    from stacklab.stacks import STACKS
    with pytest.raises(ValueError) as e:
        STACKS.canonical(text)
    assert f"would hold its own {held}, which a cluster shares" in str(e.value)
    assert STACKS.canonical(text.rsplit(" * ", 1)[0])     # one copy behind a layer is fine


def test_weights_on_a_layer_with_one_backend_are_refused_before_anything_starts(tmp_path):
    """haproxy behind varnish has one backend (varnish's director spreads the replicas)."""
    from typer.testing import CliRunner
    from stacklab.cli import cli
    spec = tmp_path / "w.toml"
    spec.write_text('[experiment]\nremeasure = 0\nname = "w"\nrepetitions = 1\nduration = "1s"\n'
                    '[knobs]\nhaproxy.weights = "1,2"\n'
                    '[matrix]\nstack = ["haproxy > varnish > nginx * 2"]\n'
                    'workload = ["static-page"]\nconcurrency = [1]\n')
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                      "--dry-run"])
    assert result.exit_code != 0
    assert "haproxy.weights = '1,2' gives 2 weights for 1 backends" in result.output


@pytest.mark.parametrize("stack, refused", [
    ("varnish > nginx", "varnish"),
    ("squid > apache", "squid"),
    ("varnish > haproxy > nginx * 2", None),     # nginx behind haproxy, which speaks HTTPS
    ("haproxy > nginx * 2", None),
    ("nginx-proxy > nginx", None),
])
def test_https_behind_a_layer_that_speaks_only_http_is_refused_before_anything_starts(
        tmp_path, stack, refused):
    """Varnish and Squid talk plain HTTP to their backends: with the server's TLS on, every
    run would fail as its config is rendered; the plan says so first, in one line."""
    from typer.testing import CliRunner
    from stacklab.cli import cli
    server = "apache" if "apache" in stack else "nginx"
    spec = tmp_path / "t.toml"
    spec.write_text(f'[experiment]\nremeasure = 0\nname = "t"\nrepetitions = 1\nduration = "1s"\n'
                    f'[knobs]\n{server}.tls = true\n[matrix]\nstack = ["{stack}"]\n'
                    'workload = ["static-page"]\nconcurrency = [1]\n')
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                      "--dry-run"])
    said = " ".join(result.output.split())
    if refused is None:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 2, result.output
        assert f"{refused} speaks plain HTTP to what is behind it, and {server}.tls is on" \
            in said and str(spec) in said


@pytest.mark.parametrize("layer, refused", [
    ("squid", True), ("varnish", False), ("haproxy", False), ("nginx-proxy", False),
    ("apache-proxy", False),
])
def test_an_h2c_nginx_behind_a_layer_that_cannot_reach_its_socket_is_refused(
        tmp_path, layer, refused):
    """nginx with http2 on and tls off takes h2c only on its port and HTTP/1.1 on a unix
    socket: squid reaches its backends over TCP only, so the plan refuses it in one line
    naming the knobs; the other layers reach the socket (tests/test_http2.py loads
    through each)."""
    from typer.testing import CliRunner
    from stacklab.cli import cli
    spec = tmp_path / "t.toml"
    spec.write_text('[experiment]\nremeasure = 0\nname = "t"\nrepetitions = 1\nduration = "1s"\n'
                    f'[knobs]\nnginx.http2 = true\n[matrix]\nstack = ["{layer} > nginx"]\n'
                    'workload = ["static-page"]\nconcurrency = [1]\n')
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(tmp_path / "r.db"),
                                      "--dry-run"])
    said = " ".join(result.output.split())
    if not refused:
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2, result.output
    assert ("squid reaches what is behind it over TCP only, and nginx.http2 is on and "
            "nginx.tls off (its port takes h2c only)") in said and str(spec) in said


def test_how_a_layer_spreads_is_inert_where_it_has_one_backend(spec_args):
    """haproxy.balance in front of one nginx chooses nothing: noted where some trials
    have replicas, refused where none has (as every knob that cannot act)."""
    from stacklab.errors import SpecError
    from stacklab.experiment.plan import make_plan
    from stacklab.experiment.spec import parse_spec
    from stacklab.stacks import STACKS
    doc = {"experiment": {"name": "b", "repetitions": 1, "duration": "1s"},
           "matrix": {"stack": ["haproxy > nginx", "haproxy > nginx * 2",
                                "haproxy > varnish > nginx * 2"],
                      "workload": ["static-page"], "concurrency": [1],
                      "haproxy": {"balance": ["roundrobin", "leastconn"]}}}
    plan = make_plan(parse_spec(doc, "b.toml", *spec_args), STACKS)
    [note] = [n for n in plan.notes if n.startswith("haproxy.balance")]
    assert "cannot act in 4 of 6 trials" in note
    assert "haproxy has one backend in haproxy > nginx: nothing to spread" in note
    assert "haproxy has one backend in haproxy > varnish > nginx * 2" in note
    doc["matrix"]["stack"] = ["haproxy > nginx"]
    with pytest.raises(SpecError) as e:
        make_plan(parse_spec(doc, "b.toml", *spec_args), STACKS)
    assert "matrix.haproxy.balance" in str(e.value) and "inert in every trial" in str(e.value)
