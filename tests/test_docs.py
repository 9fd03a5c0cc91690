"""The user's and the developer's documents point only inside the repository: a reader of
a checkout (offline, or years later) can follow every link, and no link breaks when a
file moves without the document following it.

Every relative link in README.md, CONTRIBUTING.md and the manual's pages (docs/) — Markdown `[text](path)`, a
reference definition `[name]: path`, or an HTML `href`/`src` — resolves to a file or
directory of the repository, and its #anchor to a heading there; neither document holds
an http(s) URL, linked or not. The README stays short (the manual is docs/), and the
manual builds as a site with `mkdocs build --strict`, its headings' anchors the same
there as on a code host, so a link to one works in both."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "CONTRIBUTING.md",
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
README_LINES = 250      # what a newcomer reads before the first experiment

# [text](target "title"), ![alt](target), [name]: target, href="target", src='target'
_INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
_HTML = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
_URL = re.compile(r"\bhttps?://", re.I)
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def links(text: str) -> list[str]:
    """Every link target in a Markdown text, outside fenced code blocks (a sample's
    `[a](b)` in a terminal table is not a link)."""
    prose = _FENCE.sub("", text)
    return [m.group(1) for pattern in (_INLINE, _REFERENCE, _HTML)
            for m in pattern.finditer(prose)]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as
    hyphens ("Statistics: the decision rule" -> "statistics-the-decision-rule")."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown text's headings (outside fenced code blocks)."""
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$",
                                                   _FENCE.sub("", text), re.M)}


def resolves(doc: Path, target: str) -> bool:
    """A relative target names a file or directory inside the repository (a ?query
    aside); its #anchor, where it has one and names a Markdown file (a bare #anchor is
    the document itself), is one of that file's headings."""
    path, _, anchor = re.split(r"\?", target, maxsplit=1)[0].partition("#")
    found = (doc.parent / path).resolve() if path else doc
    if not (found.is_relative_to(ROOT) and found.exists()):
        return False
    return not anchor or found.suffix != ".md" or anchor in anchors(found.read_text())


def test_links_are_found_in_markdown_reference_and_html_forms():
    text = ("See [the rules](VALIDITY.md#busy), ![chart](docs/a.png \"A\").\n"
            "[engine]: engine/README.md\n<a href='presets/quick.toml'>quick</a>\n"
            "```\n[not](a-link.md)\n```\n")
    assert links(text) == ["VALIDITY.md#busy", "docs/a.png", "engine/README.md",
                           "presets/quick.toml"]


def test_an_anchor_is_a_heading_as_github_names_it():
    text = "# Top\n## Statistics: the decision rule\n```\n# not a heading\n```\n"
    assert anchors(text) == {"top", "statistics-the-decision-rule"}
    assert slug("Request headers (`load.headers`, `load.conditional`)") == \
        "request-headers-loadheaders-loadconditional"


def test_a_link_outside_the_repository_to_a_missing_file_or_heading_does_not_resolve():
    doc = ROOT / "README.md"
    assert resolves(doc, "VALIDITY.md") and resolves(doc, "#quick-start")
    assert resolves(doc, "CONTRIBUTING.md#export-json-schema-changelog")
    assert not resolves(doc, "no-such-file.md")
    assert not resolves(doc, "#no-such-heading")
    assert not resolves(doc, "CONTRIBUTING.md#no-such-heading")
    assert not resolves(doc, "../shared/VALIDITY.md")      # beside the checkout, not in it


@pytest.mark.parametrize("name", DOCS)
def test_every_relative_link_resolves_to_a_file_of_the_repository(name):
    doc = ROOT / name
    broken = [t for t in links(doc.read_text()) if not resolves(doc, t)]
    assert broken == [], f"{name}: links that name no file of the repository: {broken}"


@pytest.mark.parametrize("name", DOCS)
def test_no_link_points_outside_the_repository(name):
    text = (ROOT / name).read_text()
    urls = [line.strip() for line in text.splitlines() if _URL.search(line)]
    assert urls == [], f"{name}: lines with an http(s) URL: {urls}"
    assert [t for t in links(text) if re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)] == []


def test_the_documents_link_each_other():
    """A user who wants to change the code finds CONTRIBUTING.md from the README, and a
    developer finds the user's reference from CONTRIBUTING.md."""
    assert "CONTRIBUTING.md" in links((ROOT / "README.md").read_text())
    assert "README.md" in links((ROOT / "CONTRIBUTING.md").read_text())


def test_the_layout_map_names_every_module_of_the_package():
    """CONTRIBUTING.md's layout map names every module of stacklab/ (its __init__.py
    files aside), and every module it names is there: a new module is found on the map,
    and a moved or removed one leaves no stale name.

    The map is a tree: a line whose first word ends in "/" opens that directory for the
    lines indented deeper, and each `name.py` on a line is a file of the innermost
    directory open there (`stacks/<component>/knobs.py`, a pattern, names no file)."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    block = re.search(r"^## Layout\n.*?^```\n(.*?)^```", text, re.M | re.S).group(1)
    named, open_dirs = set(), [(-1, ROOT)]
    for line in block.splitlines():
        indent, words = len(line) - len(line.lstrip()), line.split()
        while open_dirs[-1][0] >= indent:
            open_dirs.pop()
        if words and words[0].endswith("/"):
            open_dirs.append((indent, open_dirs[-1][1] / words[0]))
        named |= {open_dirs[-1][1] / m for m in
                  re.findall(r"(?<![\w/.<>*])([\w/]+\.py)\b", line)}
    package = ROOT / "stacklab"
    modules = {p for p in package.rglob("*.py") if p.name != "__init__.py"}
    rel = lambda paths: sorted(str(p.relative_to(ROOT)) for p in paths)  # noqa: E731
    assert rel(modules - named) == [], "modules missing from CONTRIBUTING.md's layout"
    assert rel(p for p in named if not p.is_file()) == [], "named on the map, not there"


def test_the_readme_is_short_and_leads_to_every_page_of_the_manual():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    led = {Path(t.partition("#")[0]).name for t in links(readme) if t.startswith("docs/")}
    assert pages - led - {"index.md"} == set(), "manual pages the README does not name"


def test_every_page_is_in_the_sites_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if f": {p.name}" not in nav]
    assert missing == []


def test_headings_have_the_same_anchor_on_a_code_host_and_in_the_site():
    """MkDocs' anchors (Python-Markdown's toc) collapse runs of hyphens and drop what is
    not ASCII; GitHub's keep both: a heading where they differ breaks a link in one."""
    from markdown.extensions.toc import slugify
    differ = [(name, m.group(1)) for name in DOCS if name.startswith("docs/")
              for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$",
                                   _FENCE.sub("", (ROOT / name).read_text()), re.M)
              if slug(m.group(1)) != slugify(re.sub(r"`([^`]*)`", r"\1", m.group(1)), "-")]
    assert differ == []


def test_the_manual_builds_strictly(tmp_path):
    """Every page in the navigation, every link between pages and every anchor checked by
    MkDocs itself (links out of docs/ are the repository's: checked above)."""
    done = subprocess.run([str(Path(sys.executable).with_name("mkdocs")), "build", "--strict",
                           "-q", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "capacity.html").is_file()
