"""MediaWiki's seeded wiki: the articles (generated from the seed), and the installer that
makes the database with MediaWiki's own maintenance scripts.

The installer runs once per seeded datadir (realapp.AppDatabase.install), against the
seeding server's socket, with PHP's command line: `install.php` creates the schema and
the administrator (its LocalSettings.php goes to a temporary directory and is thrown
away: the workload writes its own), `importDump.php` imports an XML dump of the articles
and templates (one process for every page, and it runs each page's links update, so
templatelinks, pagelinks and categorylinks are filled as an edit would), then
`rebuildtextindex.php` (the search index) and `initSiteStats.php` (the counts special
pages show). The tables end in the engine the mariadb.engine knob names: install.php
makes InnoDB tables and a MyISAM `searchindex`, so every other table is altered after.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from .mediawiki_settings import SITENAME, local_settings
from .realapp import AppDatabase, php_string, run_php

SOURCE = Path("/usr/share/mediawiki")
ADMIN = "Admin"
# A word no dictionary holds, in every article: a search for it finds them all, and the
# result's highlighted snippet shows the index holds the seeded text.
SEARCH_WORD = "zephyrquill"

_ADJECTIVES = ("quiet", "amber", "northern", "hidden", "silver", "broken", "early",
               "distant", "golden", "narrow", "ancient", "open", "western", "lower")
_NOUNS = ("river", "harbour", "valley", "engine", "garden", "market", "bridge",
          "library", "station", "forest", "tower", "archive", "mill", "canal")
_WORDS = ("stone", "water", "light", "season", "road", "village", "winter", "trade",
          "music", "window", "harvest", "letter", "machine", "island", "council",
          "measure", "signal", "border", "school", "festival", "journey", "record")
CATEGORIES = ("Places", "Machines", "History", "Waterways", "Buildings")

# The templates the articles use: an infobox that calls a row template (nested
# expansion), a navigation box with links, and a stub notice that puts the page in a
# category. What they render ("Infobox of <title>") is text no article's source holds.
TEMPLATES = {
    "Infobox": (
        '{| class="stacklab-infobox"\n|+ Infobox of {{PAGENAME}}\n'
        "{{Infobox row|Kind|{{{kind}}}}}\n{{Infobox row|Founded|{{{founded}}}}}\n"
        "{{Infobox row|Population|{{formatnum:{{{population}}}}}}}\n|}"),
    "Infobox row": "|-\n! {{{1}}}\n| {{{2}}}",
    "Navbox": ('<div class="stacklab-navbox">See also: [[{{{1}}}]] · [[{{{2}}}]] · '
               "[[{{{3}}}]] · [[:Category:{{{cat}}}|more in {{{cat}}}]]</div>"),
    "Stub": ("''This article about {{lc:{{PAGENAME}}}} is a stub.''"
             "[[Category:Stubs]]"),
}


@dataclass(frozen=True)
class Article:
    title: str           # "Quiet river 001": spaces, as MediaWiki shows it
    text: str            # wikitext

    @property
    def url_title(self) -> str:
        return self.title.replace(" ", "_")


def titles_of(count: int) -> list[str]:
    """The articles' titles: the same for every seed (a workload's URLs are fixed when it
    is registered; the seed makes the text)."""
    return [f"{_ADJECTIVES[i % len(_ADJECTIVES)].capitalize()} "
            f"{_NOUNS[i * 5 % len(_NOUNS)]} {i:03d}" for i in range(1, count + 1)]


def articles(seed: int, count: int) -> list[Article]:
    """The seeded articles: each uses the templates, links three others and sits in a
    category; the same seed gives the same wiki."""
    rng = random.Random(seed)
    titles = titles_of(count)
    out = []
    for title in titles:
        links = rng.sample(titles, 3)
        cat = rng.choice(CATEGORIES)
        paragraphs = "\n\n".join(
            " ".join(rng.choice(_WORDS) for _ in range(40)).capitalize()
            + f" [[{rng.choice(titles)}]] {SEARCH_WORD}." for _ in range(4))
        text = (f"{{{{Infobox|kind={cat.lower()}|founded={rng.randint(1200, 1990)}"
                f"|population={rng.randint(100, 2_000_000)}}}}}\n"
                f"'''{title}''' is a {rng.choice(_ADJECTIVES)} place.\n\n"
                f"== History ==\n{paragraphs}\n\n== See also ==\n"
                f"{{{{Navbox|{links[0]}|{links[1]}|{links[2]}|cat={cat}}}}}\n"
                f"{{{{Stub}}}}\n[[Category:{cat}]]")
        out.append(Article(title, text))
    return out


def dump_xml(pages: list[tuple[str, str]]) -> str:
    """A MediaWiki XML export (schema 0.11) of (title, wikitext) pages, one revision each,
    at a fixed timestamp."""
    body = "".join(
        f"<page><title>{escape(title)}</title><revision><timestamp>2026-01-01T00:00:00Z"
        f"</timestamp><contributor><username>{ADMIN}</username></contributor>"
        f"<model>wikitext</model><format>text/x-wiki</format>"
        f'<text xml:space="preserve">{escape(text)}</text></revision></page>\n'
        for title, text in pages)
    return ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" '
            f'xml:lang="en">\n{body}</mediawiki>\n')


def all_pages(seed: int, count: int) -> list[tuple[str, str]]:
    return ([(f"Template:{name}", text) for name, text in TEMPLATES.items()]
            + [(f"Category:{c}", f"Articles about {c.lower()}.") for c in CATEGORIES]
            + [(a.title, a.text) for a in articles(seed, count)])


_ENGINES = """<?php
$db = new mysqli('localhost', {user}, {password}, {name});
$want = {engine};
$res = $db->query("SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES WHERE "
                  . "TABLE_SCHEMA = DATABASE()");
foreach ($res->fetch_all() as [$table, $engine]) {{
    if (strcasecmp($engine, $want) != 0) {{
        $db->query("ALTER TABLE `$table` ENGINE=$want") or die($db->error . "\\n");
    }}
}}
"""


def install(db: AppDatabase, socket: Path, engine: str, log_dir: Path) -> None:
    """MediaWiki's schema, its administrator, the seeded pages and their indexes."""
    count = dict(db.sizes)["articles"]
    log = log_dir / "mediawiki-seed.log"
    with tempfile.TemporaryDirectory(prefix="stacklab-mediawiki-") as tmp:
        work = Path(tmp)
        (work / "cache").mkdir()
        maint = SOURCE / "maintenance"

        def php(script: str, argv: list[str]) -> None:
            run_php(argv, work, socket, log, f"mediawiki seeding: {script}", timeout_s=300)

        php("install.php", [
            str(maint / "install.php"), "--dbtype=mysql", "--dbserver=localhost",
            f"--dbname={db.name}", f"--dbuser={db.user}", f"--dbpass={db.password}",
            f"--installdbuser={db.user}", f"--installdbpass={db.password}",
            "--server=http://localhost", "--scriptpath=", "--lang=en", "--skins=Vector",
            f"--pass=stacklab-admin-{db.seed}", f"--confpath={work}", SITENAME, ADMIN])
        (work / "engines.php").write_text(_ENGINES.format(
            user=php_string(db.user), password=php_string(db.password),
            name=php_string(db.name), engine=php_string(engine)))
        php("engines", [str(work / "engines.php")])
        conf = work / "LocalSettings.php"
        conf.write_text(local_settings(db, cache_dir=php_string(str(work / "cache")),
                                       error_log=None))
        (work / "dump.xml").write_text(dump_xml(all_pages(db.seed, count)))
        for script, args in (("importDump.php", [str(work / "dump.xml")]),
                             ("rebuildtextindex.php", []),
                             ("initSiteStats.php", ["--update"])):
            php(script, [str(maint / script), f"--conf={conf}", *args])
