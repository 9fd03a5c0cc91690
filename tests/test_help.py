"""Every command's --help shows its help texts as written: a word in square brackets
([external], [tune], [default: 5s]) is not read by Rich as a markup tag and dropped."""

import re

import pytest
import typer
from typer.testing import CliRunner

from stacklab.cli import cli

BRACKETED = re.compile(r"\[[^\[\]\n]+\]")


def commands() -> dict[str, object]:
    group = typer.main.get_command(cli)
    return {"": group, **group.commands}


def bracketed(command) -> set[str]:
    """The square-bracketed words of the command's own help texts, as written."""
    texts = [getattr(part, field, None) for part in (command, *command.params)
             for field in ("help", "epilog")]
    return {" ".join(m.split()) for text in texts if text
            for m in BRACKETED.findall(text.replace("\\[", "["))}


def test_the_help_texts_have_bracketed_words_to_show():
    """What the issue named: the words this test watches are there to watch."""
    found = {name: bracketed(c) for name, c in commands().items()}
    assert "[external]" in found["run"] and "[tune]" in found["tune"]
    assert "[default: 5s]" in found["capacity"]


@pytest.mark.parametrize("name", sorted(commands()))
def test_no_bracketed_word_vanishes_from_help(name):
    argv = [name, "--help"] if name else ["--help"]
    shown = CliRunner().invoke(cli, argv, env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.replace("│", " ").split())
    lost = sorted(w for w in bracketed(commands()[name]) if w not in text)
    assert not lost, f"`stacklab {' '.join(argv)}` drops {lost}"
    assert "\\[" not in text            # escaped for Rich, shown as written
