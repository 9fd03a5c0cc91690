"""The tuner's reference space (bench/tune_reference.py): the fixture holds every
combination of its space, each measured, and a replayed search runs as `stacklab tune`
samples (a small one here: the benchmark itself is run by hand)."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bench():
    spec = importlib.util.spec_from_file_location("tune_reference",
                                                  ROOT / "bench" / "tune_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fixture_holds_every_combination_of_its_space_measured():
    doc = json.loads((ROOT / "bench" / "fixtures" / "tune-reference.json").read_text())
    keys = sorted(doc["space"])
    every = {json.dumps(dict(zip(keys, combo)), sort_keys=True)
             for combo in itertools.product(*(doc["space"][k] for k in keys))}
    held = {json.dumps(c["values"], sort_keys=True) for c in doc["combos"]}
    assert held == every and len(every) == 144
    assert all(len(c["rps"]) == 2 and min(c["rps"]) > 0 for c in doc["combos"])


def test_a_replayed_search_scores_what_it_calls_best(capsys):
    b = bench()
    b.replay(trials=12, seeds=1)
    out = capsys.readouterr().out
    assert "tpe" in out and "random" in out and "target ≥ 95% in ≤ 12 trials" in out
    assert b.reached([0.9, 0.96, 0.94, 0.97, 0.99]) == 4     # from where it stays
    assert b.reached([0.9, 0.94]) is None
