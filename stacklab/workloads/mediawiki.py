"""MediaWiki 1.39 from Debian's package as a workload (issue 24): a seeded wiki of
ARTICLES articles built on a few templates, read as anonymous visitors read it.

The package's directory (/usr/share/mediawiki) is deployed as a Tree; Debian points
LocalSettings.php, config, extensions and images out of it into /etc and /var/lib:
LocalSettings.php is ours (mediawiki_settings.py), the others are left out (no extension
is loaded, no upload is made), so nothing under /etc or /var/lib is read. The database is
made by MediaWiki's own installer and importer (mediawiki_seed.py).

What a page view measures: MediaWiki parses an article on its first view and keeps the
result in its parser cache (APCu with php.apcu on, MariaDB's objectcache table without);
verification views every page first, so the load measures the cached view — the
skin, the session-less request, the page and revision lookups, the parser cache read —
and never the parser itself. Search is MySQL's full-text search on every request;
Special:AllPages a listing query on every request.
"""

from __future__ import annotations

from pathlib import Path

from ..measure.verify import Expect
from .files import File, Tree, Url
from .mediawiki_seed import SEARCH_WORD, SOURCE, install, titles_of
from .mediawiki_settings import local_settings
from .realapp import AppDatabase, AppPage, RealApp, package_version

PACKAGE = "mediawiki"
ARTICLES = 200
MIX_ARTICLES = 8                  # the mix reads this many articles
# Debian's links out of the package directory (LocalSettings.php is written as a File).
SKIP = ("LocalSettings.php", "config", "extensions", "images")
CACHE_DIR = "/cache"              # $wgCacheDirectory: the localisation cache's files

SEARCH = f"/index.php?title=Special:Search&search={SEARCH_WORD}&fulltext=1"
ALLPAGES = "/index.php?title=Special:AllPages"
# The highlighted snippet of a hit: only an indexed seeded article gives it.
SEARCH_MARK = f"<span class='searchmatch'>{SEARCH_WORD}</span>".encode()


def article_url(title: str) -> str:
    return f"/index.php?title={title.replace(' ', '_')}"


def article_mark(title: str) -> bytes:
    """What only the article's templates render: the infobox's caption names the page."""
    return f"Infobox of {title}".encode()


def _shown() -> list[str]:
    """The articles the pages read: the first MIX_ARTICLES of the seeded wiki."""
    return titles_of(ARTICLES)[:MIX_ARTICLES]


def files(seed: int) -> list:
    first = _shown()[0]
    return [
        Tree(SOURCE, package_version(PACKAGE), skip=SKIP),
        File("/LocalSettings.php", local_settings(database(seed)).encode(), check=False),
        *(Url(article_url(t), Expect(contains=article_mark(t))) for t in _shown()),
        Url(SEARCH, Expect(contains=SEARCH_MARK)),
        Url(ALLPAGES, Expect(contains=f">{first}</a>".encode())),
    ]


def database(seed: int) -> AppDatabase:
    return AppDatabase(
        PACKAGE, seed, package_version(PACKAGE), (("articles", ARTICLES),), install,
        # Floors: the seeded articles (and templates, categories, the main page), each
        # article's template uses, category memberships and search index entries.
        tables={"page": ARTICLES, "revision": ARTICLES, "templatelinks": ARTICLES,
                "categorylinks": ARTICLES, "searchindex": ARTICLES},
        pages=(article_url(_shown()[0]), SEARCH, ALLPAGES))


def _pages() -> tuple[AppPage, ...]:
    shown = _shown()
    one = article_url(shown[0])
    mix = (*((article_url(t), 10) for t in shown), (SEARCH, 10), (ALLPAGES, 10))
    # Every page ends with its own backend time ("wgBackendResponseTime":45) and the
    # parser's limit report: its length varies from one request to the next by design.
    varying = frozenset(url for url, _ in mix)
    return (
        AppPage("mediawiki-article",
                f"MediaWiki 1.39: one rendered article ({ARTICLES} seeded, with templates, "
                "links and categories), served from the parser cache after its first view",
                ((one, 1),), cacheable=0.0, varying=varying),
        AppPage("mediawiki-search",
                "MediaWiki 1.39: Special:Search for a word every seeded article holds "
                "(MySQL full-text search, 20 hits with snippets)", ((SEARCH, 1),),
                cacheable=0.0, varying=varying),
        AppPage("mediawiki-special",
                f"MediaWiki 1.39: Special:AllPages, the {ARTICLES} seeded titles listed",
                ((ALLPAGES, 1),), cacheable=0.0, varying=varying),
        AppPage("mediawiki",
                f"MediaWiki 1.39: a mix of {MIX_ARTICLES} articles (parser cache), "
                "a search and Special:AllPages", mix, cacheable=0.0, varying=varying),
    )


APP = RealApp(pages=_pages(), files=files, database=database, writable=(CACHE_DIR,),
              packages=(PACKAGE,))
