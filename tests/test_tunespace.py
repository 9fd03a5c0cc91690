"""The tuner's search space read off the knob registry (issue 26): each knob's type and
range become an Optuna dimension, a narrowed range or a list of values is honoured and
checked, and a knob that acts only with another is suggested only where it can act."""

from __future__ import annotations

import optuna
import pytest

from stacklab.experiment.tunespace import Dimension, SpaceError, acts, dimensions, suggest
from stacklab.stacks import REGISTRY

optuna.logging.set_verbosity(optuna.logging.WARNING)


def dims(**asked) -> dict[str, Dimension]:
    return {d.key: d for d in dimensions(REGISTRY, {k.replace("__", "."): v
                                                    for k, v in asked.items()})}


def test_types_and_ranges_come_from_the_registry():
    d = dims(nginx__sendfile=True, **{"php-fpm__pm": True}, nginx__worker_processes=True,
             apache__max_request_workers=True)
    assert d["nginx.sendfile"] == Dimension("nginx.sendfile", "categorical", True,
                                            choices=(False, True))
    assert d["php-fpm.pm"].choices == ("static", "dynamic", "ondemand")
    workers = d["nginx.worker_processes"]
    assert (workers.kind, workers.low, workers.high, workers.log) == ("int", 0, 64, False)
    # 1..20000: searched on a log scale (2 and 4 as far apart as 10000 and 20000)
    mrw = d["apache.max_request_workers"]
    assert (mrw.low, mrw.high, mrw.log) == (1, 20000, True)


def test_a_narrowed_range_and_a_list_of_values_are_honoured():
    d = dims(nginx__worker_processes={"min": 1, "max": 4},
             **{"php-fpm__max_children": {"min": 4, "max": 256, "log": False}},
             nginx__keepalive_timeout=[0, 5, 65])
    assert (d["nginx.worker_processes"].low, d["nginx.worker_processes"].high) == (1, 4)
    assert d["php-fpm.max_children"].log is False
    assert d["nginx.keepalive_timeout"].choices == (0, 5, 65)


@pytest.mark.parametrize("key, how, says", [
    ("nginx.nosuch", True, "no such knob"),
    ("nginx.include", True, "not bounded"),
    ("nginx.worker_processes", {"min": 4, "max": 2}, "min must be below max"),
    ("nginx.worker_processes", {"min": 1, "max": 999}, "<= 64"),
    ("nginx.worker_processes", {"min": 0, "max": 8, "log": True}, "log scale needs min > 0"),
    ("nginx.worker_processes", {"low": 1, "high": 4}, "expected { min = A, max = B }"),
    ("nginx.sendfile", {"min": 0, "max": 1}, "a range needs a number"),
    ("php-fpm.pm", ["static", "forking"], "must be one of"),
    ("php-fpm.pm", ["static"], "at least two values"),
    ("php-fpm.pm", ["static", "static"], "given twice"),
    ("php.opcache", "yes", "expected true"),
])
def test_what_cannot_be_searched_is_refused_naming_the_knob(key, how, says):
    with pytest.raises(SpaceError) as e:
        dimensions(REGISTRY, {key: how})
    assert e.value.key == key and says in str(e.value), str(e.value)


def test_a_knob_comes_after_those_it_acts_with():
    order = [d.key for d in dimensions(REGISTRY, {"nginx.tcp_nopush": True,
                                                  "nginx.gzip_comp_level": True,
                                                  "nginx.gzip": True,
                                                  "nginx.sendfile": True})]
    assert order.index("nginx.sendfile") < order.index("nginx.tcp_nopush")
    assert order.index("nginx.gzip") < order.index("nginx.gzip_comp_level")


def defaults(*components: str) -> dict:
    return {f"{c}.{k}": v for c in components for k, v in REGISTRY.defaults(c).items()}


def test_a_conditional_knob_is_suggested_only_where_it_can_act():
    """Over 60 random trials: threads_per_child is a parameter exactly in the trials whose
    MPM is worker or event; elsewhere it keeps its default and Optuna never saw it."""
    space = dimensions(REGISTRY, {"apache.threads_per_child": {"min": 4, "max": 64},
                                  "apache.mpm": ["prefork", "event"]})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = {"prefork": 0, "event": 0}
    for _ in range(60):
        trial = study.ask()
        values = suggest(trial, space, defaults("apache"))
        study.tell(trial, 1.0)
        seen[values["apache.mpm"]] += 1
        if values["apache.mpm"] == "prefork":
            assert "apache.threads_per_child" not in trial.params
            assert values["apache.threads_per_child"] == 25      # its default
        else:
            assert 4 <= trial.params["apache.threads_per_child"] <= 64
    assert min(seen.values()) > 10, seen


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_condition_on_a_knob_not_searched_reads_its_fixed_value():
    [nopush] = dimensions(REGISTRY, {"nginx.tcp_nopush": True})
    assert acts(nopush, {"nginx.sendfile": True})
    assert not acts(nopush, {"nginx.sendfile": False})
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1, multivariate=True,
                                                                   group=True))
    trial = study.ask()
    values = suggest(trial, (nopush,), {**defaults("nginx"), "nginx.sendfile": False})
    assert values == {"nginx.tcp_nopush": True} and trial.params == {}


def test_a_nested_table_is_told_to_name_the_knob_whole():
    with pytest.raises(SpaceError, match='"nginx.NAME" = ... under'):
        dimensions(REGISTRY, {"nginx": {"worker_processes": True}})
