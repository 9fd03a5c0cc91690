"""Planning: stable trial ids, exclusions, inapplicable knobs dropped, interleaving; knobs
that cannot act noted or refused."""

import pytest

from stacklab.errors import SpecError
from stacklab.experiment.plan import Trial, expand, interleave, make_plan
from stacklab.experiment.spec import parse_spec
from stacklab.stacks import STACKS

COMPONENTS = STACKS


def spec(spec_args, **matrix):
    doc = {"experiment": {"name": "p", "repetitions": 3, "requests": 100},
           "matrix": {"stack": ["nginx", "apache"], "workload": ["static-page"],
                      "concurrency": [1, 4], **matrix}}
    return parse_spec(doc, "p.toml", *spec_args)


def test_trial_id_is_a_stable_hash_of_the_definition():
    t = Trial("nginx", "static-page", 4, (("nginx.sendfile", True),), (("requests", 10),))
    same = Trial("nginx", "static-page", 4, (("nginx.sendfile", True),), (("requests", 10),))
    other = Trial("nginx", "static-page", 8, (("nginx.sendfile", True),), (("requests", 10),))
    assert t.id == same.id != other.id
    assert len(t.id) == 12
    # Pinned to the canonical JSON: changing how ids are computed would orphan stored runs.
    import hashlib
    canon = ('{"concurrency":4,"knobs":{"nginx.sendfile":true},"measure":{"requests":10},'
             '"stack":"nginx","workload":"static-page"}')
    assert t.id == hashlib.sha256(canon.encode()).hexdigest()[:12]


def test_ids_do_not_depend_on_axis_order(spec_args):
    a = expand(spec(spec_args), COMPONENTS)
    doc_b = spec(spec_args)
    b = expand(doc_b.model_copy(update={"axes": dict(reversed(list(doc_b.axes.items())))}),
               COMPONENTS)
    assert {t.id for t in a} == {t.id for t in b}


def test_cartesian_product_minus_exclusions(spec_args):
    trials = expand(spec(spec_args, exclude=[{"stack": "apache", "concurrency": 4}]),
                    COMPONENTS)
    got = {(t.stack, t.concurrency) for t in trials}
    assert got == {("nginx", 1), ("nginx", 4), ("apache", 1)}


def test_knob_axis_applies_only_to_stacks_with_that_component(spec_args):
    trials = expand(spec(spec_args, nginx={"worker_processes": [1, 2]}), COMPONENTS)
    nginx = [t for t in trials if t.stack == "nginx"]
    apache = [t for t in trials if t.stack == "apache"]
    assert len(nginx) == 4 and len(apache) == 2
    assert all(not t.knobs for t in apache)


def test_repetitions_are_interleaved(spec_args):
    plan = make_plan(spec(spec_args), COMPONENTS)
    order = [(r.trial.id, r.repetition) for r in plan.runs]
    n = len(plan.trials)
    assert len(order) == 3 * n
    assert [rep for _, rep in order] == [1] * n + [2] * n + [3] * n
    assert {tid for tid, _ in order[:n]} == {tid for tid, _ in order[n:2 * n]}
    assert make_plan(spec(spec_args), COMPONENTS).runs == plan.runs   # the same each time


def test_each_round_holds_every_trial_once_in_an_order_drawn_per_round():
    """A run's place in its round (first after the last round's writeback) favours no
    trial: over 40 rounds each of two trials goes first about half the time."""
    a = Trial("nginx", "w", 1, (), ())
    b = Trial("apache", "w", 1, (), ())
    runs = interleave([a, b], 40)
    rounds = [runs[i:i + 2] for i in range(0, 80, 2)]
    assert all({r.trial.stack for r in pair} == {"nginx", "apache"} and
               {r.repetition for r in pair} == {k} for k, pair in enumerate(rounds, 1))
    first = sum(pair[0].trial.stack == "nginx" for pair in rounds)
    assert 10 <= first <= 30, first
    assert interleave([a, b], 40) == runs


# --- knobs that cannot act everywhere; knobs a stack sets; an empty matrix -----------

def planned(spec_args, knobs=None, **matrix):
    doc = {"experiment": {"name": "p", "repetitions": 1, "requests": 100},
           "matrix": {"stack": ["nginx"], "workload": ["static-page"], "concurrency": [1],
                      **matrix}}
    if knobs:
        doc["knobs"] = knobs
    return make_plan(parse_spec(doc, "p.toml", *spec_args), COMPONENTS)


def refusal(spec_args, knobs=None, **matrix) -> SpecError:
    with pytest.raises(SpecError) as e:
        planned(spec_args, knobs, **matrix)
    assert e.value.file == "p.toml" and "\n" not in str(e.value)
    return e.value


def test_a_knob_inert_in_some_trials_is_applied_and_noted(spec_args):
    plan = planned(spec_args, {"nginx": {"tcp_nopush": True}}, nginx={"sendfile": [True, False]})
    assert [dict(t.knobs)["nginx.tcp_nopush"] for t in plan.trials] == [True, True]
    assert plan.notes == ("nginx.tcp_nopush = True cannot act in 1 of 2 trials with nginx "
                          "(acts only with nginx.sendfile on); it is applied where it can",)
    mixed = planned(spec_args, {"apache": {"mpm": "prefork", "keepalive": False}},
                    stack=["nginx", "apache"])
    assert mixed.notes == ("apache.mpm, apache.keepalive: only in the trials with apache "
                           "(not in nginx)",)
    assert planned(spec_args, {"nginx": {"sendfile": True, "tcp_nopush": True}}).notes == ()


@pytest.mark.parametrize("knobs, matrix, key, fragment", [
    ({"nginx": {"tcp_nopush": True, "sendfile": False}}, {}, "knobs.nginx.tcp_nopush",
     "acts only with nginx.sendfile on"),
    ({"nginx": {"tls_protocols": "TLSv1.2"}}, {}, "knobs.nginx.tls_protocols",
     "acts only with nginx.tls on"),
    ({"nginx": {"tls": True, "tls_ciphers": "ECDHE-RSA-AES128-GCM-SHA256"}}, {},
     "knobs.nginx.tls_ciphers", "TLS 1.3 is negotiated"),
    ({"apache": {"mpm": "prefork"}}, {}, "knobs.apache.mpm",
     "no stack in the matrix has apache"),
    ({}, {"apache": {"threads_per_child": [10, 20]}, "stack": ["apache+mod_php"]},
     "matrix.apache.threads_per_child", "worker or event MPM"),
    ({"php": {"opcache_memory_mb": 64, "opcache": False}}, {"stack": ["nginx+php-fpm"]},
     "knobs.php.opcache_memory_mb", "acts only with OPcache on"),
    ({"php-fpm": {"pm": "static", "start_servers": 4}}, {"stack": ["nginx+php-fpm"]},
     "knobs.php-fpm.start_servers", "pm = 'dynamic'"),
])
def test_a_knob_inert_in_every_trial_is_one_error(spec_args, knobs, matrix, key, fragment):
    e = refusal(spec_args, knobs, **matrix)
    assert e.key == key and "inert in every trial" in e.problem and fragment in e.problem


@pytest.mark.parametrize("knobs, stack, key, use", [
    ({"nginx": {"php": "fpm"}}, "nginx", "knobs.nginx.php", "nginx+php-fpm"),
    ({"apache": {"php_handler": "fpm"}}, "apache", "knobs.apache.php_handler",
     "apache+php-fpm"),
    ({"lighttpd": {"php": "fpm"}}, "lighttpd", "knobs.lighttpd.php", "lighttpd+php-fpm"),
    ({"php": {"session_handler": "memcached"}}, "nginx+php-fpm", "knobs.php.session_handler",
     "nginx+php-fpm+memcached"),
])
def test_a_knob_a_stack_sets_itself_names_the_stack_to_use(spec_args, knobs, stack, key, use):
    e = refusal(spec_args, knobs, stack=[stack])
    assert e.key == key and "set by the stack itself" in e.problem and use in e.problem
    assert f"stack {stack!r} does not" in e.problem


def test_a_stack_set_knob_at_its_default_or_on_its_own_stack_is_fine(spec_args):
    assert planned(spec_args, {"nginx": {"php": "fpm"}}, stack=["nginx+php-fpm"]).trials
    assert planned(spec_args, {"nginx": {"php": "none"}}, stack=["nginx"]).trials


def test_a_matrix_that_exclude_empties_is_refused(spec_args):
    e = refusal(spec_args, exclude=[{"stack": "nginx"}])
    assert e.key == "matrix.exclude" and "nothing would run" in e.problem


def test_every_preset_plans_without_errors():
    from pathlib import Path
    from stacklab.commands.run import load
    presets = sorted((Path(__file__).parent.parent / "presets").glob("*.toml"))
    assert presets
    for path in presets:
        spec, plan = load(path)
        assert plan.trials, path
        # each trial says what sets it apart: compare, export and the progress bar name
        # trials by label (load.keepalive and load.agents axes once gave twins)
        labels = [t.label() for t in plan.trials]
        assert len(set(labels)) == len(labels), (path, labels)


def test_a_load_knob_is_in_the_label_away_from_its_default(spec_args):
    trials = make_plan(parse_spec({
        "experiment": {"name": "x", "repetitions": 1, "requests": 100},
        "knobs": {"net": {"mode": "veth"}},
        "matrix": {"stack": ["nginx"], "workload": ["static-page"], "concurrency": [4],
                   "load": {"keepalive": [True, False], "agents": [0, 2]}}},
        "x.toml", *spec_args), STACKS).trials
    assert sorted(t.label() for t in trials) == [
        "nginx static-page c=4 load.agents=2 load.keepalive=False net.mode=veth",
        "nginx static-page c=4 load.agents=2 net.mode=veth",
        "nginx static-page c=4 load.keepalive=False net.mode=veth",
        "nginx static-page c=4 net.mode=veth"]


# --- trials that cannot differ: folded, or refused when the knob acts nowhere ---------

def test_a_link_rate_on_loopback_is_refused_naming_the_key_and_values(spec_args):
    e = refusal(spec_args, net={"link": ["unlimited", "100mbit"]})
    assert e.key == "matrix.net.link" and e.value == ["unlimited", "100mbit"]
    assert "inert in every trial" in e.problem and 'net.mode = "veth"' in e.problem


def test_trials_differing_only_in_an_inert_link_rate_are_planned_once(spec_args):
    plan = planned(spec_args, net={"mode": ["loopback", "veth"],
                                   "link": ["100mbit", "unlimited"]})
    got = sorted((dict(t.knobs)["net.mode"], dict(t.knobs)["net.link"]) for t in plan.trials)
    # on veth both rates are measured; on loopback once, at the link's default
    assert got == [("loopback", "unlimited"), ("veth", "100mbit"), ("veth", "unlimited")]
    assert len(plan.runs) == 3
    [fold] = [n for n in plan.notes if "measured once" in n]
    kept = next(t for t in plan.trials if dict(t.knobs)["net.mode"] == "loopback")
    assert "2 trials of nginx static-page c=1" in fold
    assert "net.link = '100mbit', 'unlimited'" in fold and 'net.mode = "veth"' in fold
    assert fold.endswith(f"as {kept.label()} (trial {kept.id})")


def test_a_fold_keeps_the_first_trial_when_no_inert_value_is_the_default(spec_args):
    plan = planned(spec_args, net={"mode": ["loopback", "veth"],
                                   "link": ["1gbit", "100mbit"]})
    loop = [dict(t.knobs) for t in plan.trials if dict(t.knobs)["net.mode"] == "loopback"]
    assert loop == [{"net.mode": "loopback", "net.link": "1gbit"}]
    assert len(plan.trials) == 3


def test_trials_that_differ_where_a_knob_acts_are_not_folded(spec_args):
    plan = planned(spec_args, nginx={"sendfile": [True, False], "tcp_nopush": [True, False]})
    # tcp_nopush is inert with sendfile off: those two trials are one, the others stay
    assert len(plan.trials) == 3
    assert sum("measured once" in n for n in plan.notes) == 1
    on = [dict(t.knobs)["nginx.tcp_nopush"] for t in plan.trials
          if dict(t.knobs)["nginx.sendfile"]]
    assert sorted(on) == [False, True]
