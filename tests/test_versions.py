"""A run's versions: each component's binary asked once however many knob sets its
trials have, and a runtime a knob loads (Apache's PHP handler) once per handler."""

from __future__ import annotations

from stacklab.stacks import COMPONENTS
from stacklab.stacks.base import versions_of


class Counting(type(COMPONENTS["nginx"])):
    asked = 0

    def version(self) -> str:
        type(self).asked += 1
        return "1.0"


def test_a_binary_is_asked_once_for_all_its_knob_sets():
    nginx = Counting()
    used = [(nginx, {"worker_processes": n, "sendfile": s}) for n in (1, 2, 4)
            for s in (True, False)]
    assert versions_of(used) == {"nginx": "1.0"}
    assert Counting.asked == 1


def test_a_knob_that_loads_a_runtime_is_asked_per_value():
    apache = COMPONENTS["apache"]
    assert apache.versions_depend_on({"php_handler": "mod_php", "mpm": "prefork"}) == \
        ("mod_php",)
    assert apache.versions_depend_on({"php_handler": "none", "mpm": "event"}) != \
        apache.versions_depend_on({"php_handler": "mod_php", "mpm": "event"})
