"""A knob's dotted name written in quotes ("nginx.worker_processes" = [1, 2]) is one key
to TOML, not the table nginx holding worker_processes: the error says that, where the
matrix used to call it an unknown axis and [knobs] to ask for a table."""

import tomllib

import pytest

from stacklab.errors import SpecError
from stacklab.experiment.spec import parse_spec

DOC = """
[experiment]
name = "quoted"
duration = "1s"

[matrix]
stack = ["nginx"]
workload = ["static-page"]
concurrency = [1]
"""


@pytest.mark.parametrize("section, line", [
    ("matrix", '"nginx.worker_processes" = [1, 2]'),
    ("knobs", '"nginx.worker_processes" = 2'),
])
def test_a_quoted_knob_name_is_said_to_be_quoted(spec_args, section, line):
    text = DOC.replace("[matrix]", f"[matrix]\n{line}") if section == "matrix" else \
        DOC + f"\n[knobs]\n{line}\n"
    with pytest.raises(SpecError) as e:
        parse_spec(tomllib.loads(text), "x.toml", *spec_args)
    said = str(e.value)
    assert said.startswith(f'x.toml: {section}."nginx.worker_processes" = ')
    assert "a quoted key is one name to TOML, not nginx's knob 'worker_processes'" in said
    assert "write nginx.worker_processes without the quotes" in said
    assert "unknown axis" not in said and "expected a table" not in said


@pytest.mark.parametrize("section, line", [
    ("matrix", "nginx.worker_processes = [1, 2]"),
    ("knobs", "nginx.worker_processes = 2"),
])
def test_the_same_name_unquoted_is_the_knob(spec_args, section, line):
    text = DOC.replace("[matrix]", f"[matrix]\n{line}") if section == "matrix" else \
        DOC + f"\n[knobs]\n{line}\n"
    parse_spec(tomllib.loads(text), "x.toml", *spec_args)
