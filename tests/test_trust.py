"""The instrument's own honesty on real servers: ready means the configured processes
exist, CPU placement holds for every process, and distorted runs are flagged."""

import os
from pathlib import Path

import pytest

from stacklab import procs
from stacklab.stack import RunningStack, start_stack, stop_stack
from stacklab.stacks import REGISTRY, STACKS
from stacklab.stacks.tls import make_certificate
from stacklab.workloads import deploy

from test_stacks import knobs_for

pytestmark = pytest.mark.integration


def started(session, stack, **overrides) -> RunningStack:
    deployed = deploy("static-page", session.run_dir("docroot-static-page"))
    running = RunningStack(STACKS[stack])
    try:
        start_stack(running, knobs_for(stack, **overrides), deployed,
                    session.run_dir(f"run-{len(list(session.dir.iterdir()))}"),
                    make_certificate(session.dir), session.run_dir("cache"))
    except BaseException:
        stop_stack(running)
        raise
    return running


def members(running: RunningStack, name: str) -> list[int]:
    s = next(s for s in running.started if s.name == name)
    return procs.group_members(s.proc.pgid)


@pytest.mark.parametrize("stack, overrides, component, want", [
    ("apache+mod_php", {"apache__start_servers": 200, "apache__max_request_workers": 256,
                        "apache__max_spare_servers": 256}, "apache", 201),
    ("apache", {"apache__mpm": "event", "apache__start_servers": 4}, "apache", 5),
    ("nginx+php-fpm", {"php_fpm__pm": "static", "php_fpm__max_children": 120}, "php-fpm",
     121),
    ("nginx", {"nginx__worker_processes": 4}, "nginx", 5),
])
def test_ready_means_the_configured_processes_exist(session, stack, overrides, component,
                                                     want):
    running = started(session, stack, **overrides)
    try:
        assert len(members(running, component)) >= want   # at once, no waiting here
    finally:
        assert stop_stack(running) == []


def test_prefork_starts_debians_five_servers_by_default(session):
    running = started(session, "apache+mod_php")
    try:
        assert "StartServers 5\n" in running.files()["apache/httpd.conf"]
        assert len(members(running, "apache")) >= 6
    finally:
        stop_stack(running)


def allowed_cpus(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def test_every_process_of_a_pinned_component_stays_on_its_cpus(session):
    cpu = str(max(os.sched_getaffinity(0)))
    running = started(session, "nginx+php-fpm", nginx__cpus=cpu, nginx__worker_processes=2,
                      php_fpm__cpus="0", php_fpm__pm="static", php_fpm__max_children=3)
    try:
        assert {allowed_cpus(p) for p in members(running, "nginx")} == {cpu}
        assert len(members(running, "nginx")) == 3
        assert {allowed_cpus(p) for p in members(running, "php-fpm")} == {"0"}
    finally:
        stop_stack(running)


@pytest.mark.parametrize("value, why", [("999", "CPU 999 is not available here"),
                                        ("0-x", "is not a CPU list"),
                                        ("1-0", "runs backwards")])
def test_a_cpu_list_that_cannot_be_used_is_refused_naming_it(value, why):
    with pytest.raises(ValueError, match=why):
        REGISTRY.get("nginx.cpus").check(value)
    with pytest.raises(ValueError, match="load.cpus"):
        REGISTRY.get("load.cpus").check(value)
