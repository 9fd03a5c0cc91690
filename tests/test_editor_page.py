"""S2's HTML minification: the editor's page and the same page minified, derived from it,
smaller by a stated margin, with the same visible text, and served byte-exact for real."""

import json
import re
import sqlite3
from html.parser import HTMLParser

import pytest
from typer.testing import CliRunner

from stacklab.cli import cli
from stacklab.workloads import WORKLOADS, deploy
from stacklab.workloads.editor import (CSS_PATH, EDITOR_BYTES, EDITOR_PATH, MIN_PATH,
                                       editor_html, minify)

from helpers import require_engine, server_processes

# S2: "often cut by up to 50%". Measured here: 59% of the editor's bytes at 65,864 B, 62%
# with the stylesheet counted once (51% and 65% at 16k, 60% and 62% at 126k).
AT_MOST, AT_MOST_WITH_CSS = 0.65, 0.70


class Text(HTMLParser):
    """What a reader sees: the text outside scripts and styles, one chunk per text node,
    HTML whitespace collapsed (as a browser renders it; U+00A0 is not such whitespace)."""

    def __init__(self, page: bytes):
        super().__init__(convert_charrefs=True)
        self.chunks, self.hidden = [], 0
        self.feed(page.decode())
        self.close()

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in ("script", "style")

    def handle_endtag(self, tag):
        self.hidden -= tag in ("script", "style")

    def handle_data(self, data):
        text = re.sub(r"[ \t\n\r\f]+", " ", data).strip(" ")
        if text and not self.hidden:
            self.chunks.append(text)


def test_same_seed_same_pages_other_seed_other_pages():
    assert editor_html(1) == editor_html(1) != editor_html(2)
    assert minify(editor_html(1)) == minify(editor_html(1)) != minify(editor_html(2))


@pytest.mark.parametrize("suffix, size", [("", EDITOR_BYTES), (":16k", 16 * 1024),
                                          (":126k", 126 * 1024)])
def test_both_workloads_deploy_the_same_page_before_and_after(tmp_path, suffix, size):
    editor = deploy(f"editor-page{suffix}", tmp_path)
    small = deploy(f"editor-page-min{suffix}", tmp_path)     # one docroot: no collision
    page, done = (tmp_path / EDITOR_PATH[1:]).read_bytes(), minify(editor_html(1, size))
    assert len(page) == size == editor.expected[EDITOR_PATH].length
    assert (tmp_path / MIN_PATH[1:]).read_bytes() == done.html       # derived, not written
    assert (tmp_path / CSS_PATH[1:]).read_bytes() == done.css
    assert set(small.expected) == {MIN_PATH}       # the stylesheet is not requested
    assert small.expected[MIN_PATH].sha256          # checked byte for byte, as static pages
    assert len(done.html) <= AT_MOST * size
    assert len(done.html) + len(done.css) <= AT_MOST_WITH_CSS * size
    assert Text(done.html).chunks == Text(page).chunks


def test_the_editor_page_is_written_as_an_editor_writes_it():
    page = editor_html(1).decode()
    for mark in ("<font face=", ' style="', 'bgcolor="', 'cellpadding="', "&nbsp;",
                 "<!-- InstanceBeginEditable", 'src="images/spacer.gif"', "\n            <"):
        assert mark in page, mark
    assert page.count("<table") >= 30 and page.count("<font") >= 100


def test_the_minified_page_keeps_structure_and_moves_formatting_to_its_stylesheet():
    page = editor_html(1)
    done = minify(page)
    html, css = done.html.decode(), done.css.decode()
    outside_scripts = re.sub(r"<script.*?</script>", "", html, flags=re.S)
    for gone in ("<font", "style=", "bgcolor", "cellpadding", "<!--", "\n  <"):
        assert gone not in outside_scripts, gone
    assert '<link href=editor.css rel=stylesheet>' in html
    for tag in ("<table", "<a ", "<img", "<b>", "<p "):
        assert html.count(tag) == page.decode().count(tag), tag
    used = set(re.findall(r"class=(s\d+)", html))
    defined = set(re.findall(r"^\.(s\d+)\{", css, re.M))
    assert used == defined and len(used) > 20
    assert ".s0{background-color:#FFFFFF;margin-left:0;margin-top:0;" in css    # <body>
    assert "font-family:Verdana, Arial, Helvetica, sans-serif;font-size:small;" in css


def test_too_small_a_size_is_refused_with_the_least_it_takes():
    assert "editor-page:8k" not in WORKLOADS                 # under the parameter's 16k
    with pytest.raises(ValueError, match="too small for the editor page"):
        editor_html(1, 8 * 1024)


TINY = """
[experiment]
name = "editor-tiny"
repetitions = 1
requests = 200
warmup = "0s"
remeasure = 0

[matrix]
stack = ["nginx", "apache"]
workload = ["editor-page", "editor-page-min"]
concurrency = [2]
"""


@pytest.mark.integration
def test_both_pages_are_served_verified_and_measured_by_nginx_and_apache(tmp_path):
    require_engine()
    spec = tmp_path / "editor.toml"
    spec.write_text(TINY)
    db = tmp_path / "stacklab.db"
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    rows = sqlite3.connect(db).execute(
        "SELECT t.label, r.outcome, r.verdicts_json, r.load_json "
        "FROM runs r JOIN trials t USING (trial_id)").fetchall()
    assert len(rows) == 4 and {outcome for _, outcome, _, _ in rows} == {"ok"}
    per_response = {}
    for label, _, verdicts, load in rows:
        verdicts, load = json.loads(verdicts), json.loads(load)
        assert {v["status"] for v in verdicts} == {"PASS"}, label
        path = MIN_PATH if "editor-page-min" in label else EDITOR_PATH
        assert f"content {path}" in {v["check"] for v in verdicts}
        assert load["status"] == {"200": 200}
        per_response[label] = load["bytes"]["total"] / load["requests"]["completed"]
    for server in ("nginx", "apache"):
        (editor,) = [b for k, b in per_response.items() if server in k and "-min" not in k]
        (small,) = [b for k, b in per_response.items() if server in k and "-min" in k]
        assert EDITOR_BYTES < editor < EDITOR_BYTES + 1000      # the body and its headers
        assert small <= AT_MOST * editor
    assert server_processes() == []
