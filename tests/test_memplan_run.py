"""capacity --memory run in-process (commands/memplan.py): the experiments it derives
from a spec, and a real plan for Apache prefork + mod_php measured and verified."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from helpers import require_engine, require_root
from stacklab.analysis.analyze import load_view
from stacklab.commands.memplan import Target, derived, memory_plan, pool, stack_limits
from stacklab.commands.run import load
from stacklab.env import Environment, utc_now
from stacklab.errors import ExitStatus, UsageError
from stacklab.experiment.plan import make_plan
from stacklab.host import lab
from stacklab.stacks import STACKS
from stacklab.store import Outcome, Store

SPEC = """
[experiment]
name = "{name}"
repetitions = 1
duration = "1s"
warmup = "0.5s"

[knobs.apache]
max_request_workers = 50

[matrix]
stack = {stacks}
workload = ["php-page", "php-blank"]
concurrency = [2, 4]
"""


def spec_file(tmp_path: Path, stacks: list[str], name: str = "mp") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(SPEC.format(name=name, stacks=str(stacks).replace("'", '"')))
    return path


def env_for(tmp_path: Path) -> Environment:
    return Environment(stdout=Console(record=True, width=200), stderr=Console(record=True),
                       clock=utc_now, db=tmp_path / "r.db", lab_root=lab.default_root())


def test_each_target_keeps_its_own_values(tmp_path):
    """Three stacks, two workloads, limits planned for three of the six pairs: the check
    runs exactly those three, and the front Apache of apache+php-fpm keeps the spec's
    MaxRequestWorkers while mod_php's is planned beside it."""
    path = spec_file(tmp_path, ["apache+mod_php", "nginx+php-fpm", "apache+php-fpm",
                                "apache+cgi"])
    spec, _ = load(path)
    limits = stack_limits(spec)
    assert "no worker limit to plan" in limits.pop("apache+cgi")
    targets = [Target("apache+mod_php", "php-page", pool(limits["apache+mod_php"], 97)),
               Target("nginx+php-fpm", "php-blank", pool(limits["nginx+php-fpm"], 40)),
               Target("apache+php-fpm", "php-page", pool(limits["apache+php-fpm"], 30))]
    check = derived(tomllib.loads(path.read_text()), spec, "memory-check", 512, targets)
    assert check.experiment.name == "mp.memory-check"
    assert check.experiment.duration == 3.0          # a PSS reading within the load
    trials = {(t.stack, t.workload): dict(t.knobs) | {"c": t.concurrency}
              for t in make_plan(check, STACKS).trials}
    assert set(trials) == {(t.stack, t.workload) for t in targets}
    mod_php = trials[("apache+mod_php", "php-page")]
    assert (mod_php["c"], mod_php["apache.max_request_workers"],
            mod_php["apache.start_servers"], mod_php["machine.memory_mb"]) == (194, 97, 97, 512)
    fpm = trials[("apache+php-fpm", "php-page")]
    assert (fpm["c"], fpm["php-fpm.max_children"], fpm["php-fpm.pm"],
            fpm["apache.max_request_workers"]) == (60, 30, "static", 50)
    assert trials[("nginx+php-fpm", "php-blank")]["php-fpm.max_children"] == 40


def test_a_spec_without_a_worker_limit_is_one_clear_error(tmp_path):
    path = spec_file(tmp_path, ["apache+cgi"])
    with pytest.raises(UsageError, match=r"--memory 64M: no stack of .* has a worker limit"):
        memory_plan(env_for(tmp_path), path, None, "64M")


@pytest.mark.integration
def test_apache_prefork_mod_php_plan_is_measured_and_verified(tmp_path):
    """Pools of 4 and 16 mod_php workers measured with no memory limit (each run's
    accounting group charged), the plan, and the check in a 160 MiB cgroup with every
    worker busy: it fits, both experiments are stored."""
    require_engine()
    require_root("machine.memory_mb makes a cgroup")
    path = tmp_path / "mp.toml"
    path.write_text(SPEC.format(name="mp", stacks='["apache+mod_php"]')
                    .replace('["php-page", "php-blank"]', '["php-page"]')
                    .replace("[2, 4]", "[4]"))
    env = env_for(tmp_path)
    status = memory_plan(env, path, None, "160M")
    text = env.stdout.export_text()
    assert status == ExitStatus.OK, text
    assert "memory plan: apache+mod_php php-page, budget 160 MiB" in text
    assert "apache.max_request_workers = " in text and "verdict: fits" in text
    store = Store.open(tmp_path / "r.db")
    try:
        measured, checked = load_view(store, "mp.memory"), load_view(store, "mp.memory-check")
    finally:
        store.close()
    assert sorted(s.concurrency for s in measured.summaries) == [8, 32]
    # no machine profile (its part holds the group's usage only under a limit); the
    # charge is the accounting group's
    assert all(not r.resources.machine and r.resources.charged_mib for r in measured.runs)
    [s] = checked.summaries
    value = s.knobs["apache.max_request_workers"]
    assert value > 16 and s.concurrency == 2 * value
    assert s.knobs["machine.memory_mb"] == 160
    assert all(r.outcome is Outcome.OK for r in measured.runs + checked.runs)
