"""Planning: stable trial ids, exclusions, inapplicable knobs dropped, interleaving."""

from stacklab.plan import Trial, expand, interleave, make_plan
from stacklab.spec import parse_spec
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
    assert [tid for tid, _ in order[:n]] == [tid for tid, _ in order[n:2 * n]]


def test_interleave_alternates():
    a = Trial("nginx", "w", 1, (), ())
    b = Trial("apache", "w", 1, (), ())
    assert [(r.trial.stack, r.repetition) for r in interleave([a, b], 2)] == [
        ("nginx", 1), ("apache", 1), ("nginx", 2), ("apache", 2)]
