"""The fakes keep the real engine's invariants, so a test that passes on a fake report
would pass on a real one: the histogram holds one value per completed request (as
tests/test_engine_contract.py checks of the real engine), and the fake writes no key the
engine's schema does not declare (its `required` lists are checked by `fakes.checked`;
the schema allows extra top-level keys, so an invented one would pass unnoticed)."""

import pytest

from stacklab.analysis.stats import decode_histogram

from fakes import engine_schema, fake_load

# (rps, latency µs, duration s): fewer requests than the fake draws samples, about as
# many, many more (fake_experiment's nginx), and a count that does not divide evenly
SHAPES = ((50.0, 2000.0, 2.0), (200.0, 5000.0, 2.0), (20_200.0, 50.0, 2.0),
          (12_345.5, 800.0, 1.5))


@pytest.mark.parametrize("rps,latency_us,duration_s", SHAPES)
@pytest.mark.parametrize("schema", (1, 2))
def test_the_histogram_holds_one_value_per_completed_request(rps, latency_us, duration_s,
                                                              schema):
    doc = fake_load(rps, latency_us, seed=3, duration_s=duration_s, schema=schema)
    completed = doc["requests"]["completed"]
    assert completed == int(rps * duration_s)
    assert decode_histogram(doc["histogram"]).get_total_count() == completed
    assert doc["latency_us"]["count"] == completed


def _undeclared(doc, schema: dict, root: dict, where: str = "") -> list[str]:
    """Every key of `doc`, at any depth, that the schema object describing it does not
    name among its properties ($ref followed, array items walked)."""
    if "$ref" in schema:
        node = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    if isinstance(doc, list):
        return [k for i, item in enumerate(doc)
                for k in _undeclared(item, schema.get("items", {}), root, f"{where}[{i}]")]
    if not isinstance(doc, dict) or "properties" not in schema:
        return []          # a map of free keys (status codes) or a scalar
    props, found = schema["properties"], []
    for key, value in doc.items():
        if key not in props:
            found.append(f"{where}.{key}")
        else:
            found += _undeclared(value, props[key], root, f"{where}.{key}")
    return found


@pytest.mark.parametrize("schema", (1, 2, 3, 4, 5))
def test_the_fake_writes_only_keys_the_engine_schema_declares(schema):
    root = engine_schema(schema)
    doc = fake_load(20_000.0, 800.0, seed=1, schema=schema)
    assert _undeclared(doc, root, root) == []
    # every top-level key is one the engine must write: the fake invents no optional part
    assert set(doc) <= set(root["required"])


def test_the_key_check_can_fail():
    root = engine_schema(5)
    doc = fake_load(20_000.0, 800.0, seed=1)
    doc["bogus"] = 1
    doc["config"]["made_up"] = True
    doc["connections"]["requests_per_slot"]["p5"] = 0
    assert sorted(_undeclared(doc, root, root)) == [
        ".bogus", ".config.made_up", ".connections.requests_per_slot.p5"]
