"""Workloads: what is deployed into the docroot, and which URLs the load goes to."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from . import app, editor, media, mediawiki, owndir, pages, phpmyadmin, wordpress
from .deploy import Deployed, deploy_workload, gzip_named, php_log_path, place
from .files import File, Tree, Url
from .params import KIB, MIB, Param, split
from .realapp import RealApp
from .perl import perl_page
from .php import CPU_ITERATIONS, php_cpu, php_page
from .site import SITE_PATH, portal_site
from .static import PORTAL_BYTES, file_100k, portal_page, sized_page, static_page


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    build: Callable[[int], list[File | Url]]   # seed -> files (and URLs with queries)
    urls: tuple[tuple[str, int], ...]
    # What the stack must provide, capabilities or their kinds: ("php",), ("perl",),
    # ("php", "database:mysql") (see stacks/base.Capability).
    needs: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()  # directories (URL paths) the server user writes into
    database: Callable[[int], Any] | None = None   # seed -> the database it needs
    varying_length: frozenset[str] = frozenset()  # URLs whose length varies by design
    param: Param | None = None    # what `name:value` sets (see params.py), if anything
    # What a shared cache in front (Varnish, Squid, nginx proxy_cache, mod_cache) may do:
    # the share (0..1) of the load's request weight whose responses it may store, by the
    # headers the pages send (`Cache-Control: public, max-age=…` against `no-store, no-cache,
    # must-revalidate`). After warm-up it should hit about that share and never hit where 0.
    # None: not declared — the page says nothing (static files, PHP without Cache-Control)
    # and each cache's own default rules decide.
    cacheable: float | None = None
    # A parameter that sets the load rather than the files (php-cache-mix): value -> the
    # URLs with weights and the cacheable share at that value.
    mix: Callable[[int], tuple[tuple[tuple[str, int], ...], float | None]] | None = None
    # A real application whose configuration (written by build) logs PHP's errors to
    # PHP_LOG beside the docroot: verification fails on a warning or worse there.
    php_log: bool = False
    # Request headers every request of the load sends (a logged-in user's cookie).
    headers: tuple[tuple[str, str], ...] = ()

    # A workload whose value names something of the user's (dir:PATH): value -> the
    # whole workload it makes (its files, URLs and needs all follow from the value).
    own: Callable[[str], Workload] | None = None
    # What a run records with the components' versions of what this workload serves that
    # is not generated from the seed (a package's version, the user's files' hash): a
    # resume refuses to pool runs of other content, as of an upgraded server.
    versions: Callable[[], dict[str, str]] = dict

    def __post_init__(self) -> None:
        if self.cacheable is not None and not 0 <= self.cacheable <= 1:
            raise ValueError(f"{self.name}: cacheable is a share 0..1, not {self.cacheable}")

    def at(self, value: str) -> Workload:
        """This workload with its parameter set: `static-page`.at("600")."""
        if self.own is not None:
            return self.own(value)
        if self.param is None:
            raise ValueError(f"{self.name} takes no parameter (only the bare name)")
        n = self.param.parse(value)
        if n == self.param.default:
            return self          # the bare name already means these bytes
        param = self.param
        urls, cacheable = self.mix(n) if self.mix else (self.urls, self.cacheable)
        return replace(self, name=f"{self.name}:{param.spell(n)}",
                       build=lambda seed: param.build(seed, n), param=None, mix=None,
                       urls=urls, cacheable=cacheable,
                       description=f"{self.name} at {param.spell(n)} ({param.what})")


class Registry(dict):
    """Workloads by name. Iterating gives the bare names; looking up `name:value` (in,
    []) gives that workload at that value, so every stage takes a parameterised name."""

    def __missing__(self, name: str) -> Workload:
        base, value = split(name)
        if value is None or not dict.__contains__(self, base):
            raise KeyError(name)
        try:
            return self[base].at(value)
        except ValueError:
            raise KeyError(name) from None

    def __contains__(self, name: object) -> bool:
        try:
            self[name]
        except (KeyError, TypeError):
            return False
        return True


def canonical(name: str, base_dir: Path | None = None) -> str:
    """The one spelling of a workload name (raises KeyError if the workload is unknown,
    ValueError if its parameter is not valid): 'portal-page:26624' -> 'portal-page:26k';
    'dir:site' -> 'dir:/abs/site' (relative to base_dir, the experiment file's)."""
    base, value = split(name)
    workload = dict.__getitem__(WORKLOADS, base)
    if workload.own is not None:
        if value is None:
            raise ValueError(f"{base} needs a directory: {base}:PATH")
        value = str(owndir.resolve(value, base_dir))
    return name if value is None else workload.at(value).name


def own_dir(text: str) -> Workload:
    """`dir:PATH`: the user's directory (see owndir.py)."""
    root = owndir.resolve(text)
    urls = owndir.urls(root)
    return Workload(f"dir:{root}", f"your own directory {root}, copied into the run",
                    lambda seed: owndir.build(root), urls, needs=owndir.needs(root),
                    versions=lambda: owndir.versions(root),
                    varying_length=frozenset(u for u, _ in urls if owndir.is_php(u)))


def _usage(description: str, name: str, param: Param) -> str:
    return f"{description} — {param.usage(name)}"


def _one(path: str) -> tuple[tuple[str, int], ...]:
    return ((path, 1),)


PHP, PERL = ("php",), ("perl",)
APP = ("php", "database:mysql")      # the model application: PHP pages on a MySQL database


SIZED_PAGE = Param("size", 256, 64 * MIB, "the page's size", sized_page, "600")
SIZED_PORTAL = Param("size", 4 * KIB, 64 * MIB, "the page's size", portal_page, "26k",
                     default=PORTAL_BYTES)
SIZED_LIBRARY = Param("size", 1 * KIB, 16 * MIB, "the size of the PHP code it requires",
                      php_page, "680k")
SIZED_LARGE = Param("size", 64 * MIB, 64 * 1024 * MIB, "the set's total size",
                    lambda seed, total: media.large_files(media.scaled(total))(seed), "1024m",
                    default=1024 * MIB)
CPU_ROUNDS = Param("count", 1, 10_000_000, "the md5 rounds per request", php_cpu, "100000",
                   default=CPU_ITERATIONS)
SIZED_EDITOR = Param("size", 16 * KIB, 4 * MIB, "the page's size", editor.editor_page,
                     "126k", default=editor.EDITOR_BYTES)
SIZED_EDITOR_MIN = Param("size", 16 * KIB, 4 * MIB, "the size of the editor page it is made "
                         "from", editor.minified_page, "126k", default=editor.EDITOR_BYTES)
CACHE_PERCENT = Param("count", 0, 100, "the percent of requests to the cacheable page",
                      pages.php_cache_mix, "90", default=50)
CACHE_MIX_URLS, CACHE_MIX_SHARE = pages.cache_mix(CACHE_PERCENT.default)

# cacheable (see Workload): the PHP pages that send no Cache-Control, Expires or
# Last-Modified (php-page, php-cpu, php-index, php-blank, php-simple, php-output-cache,
# app-index/show/id/tree/mix) leave it None, as static files do: Varnish's built-in rules
# store them for its default_ttl (120 s, the query string notwithstanding); Squid's
# refresh_pattern gives them no freshness (and 0 to any URL with a query string), nginx's
# proxy_cache stores nothing without proxy_cache_valid, mod_cache nothing without
# validators or an expiry. What a cache does with them is that cache's to declare.

def _real(real: RealApp) -> tuple[Workload, ...]:
    """A real application's pages as workloads: PHP on a MySQL database, its errors
    logged beside the docroot and checked, its packages' versions recorded."""
    return tuple(Workload(p.name, p.description, real.files, p.urls, needs=APP,
                          database=real.database, writable=real.writable,
                          varying_length=p.varying,
                          cacheable=p.cacheable, php_log=True, headers=p.headers,
                          versions=real.versions)
                 for p in real.pages)


# The real applications, deployed from Debian's packages (doctor lists the packages).
APPLICATIONS = {"WordPress": wordpress.APP, "MediaWiki": mediawiki.APP,
                "phpMyAdmin": phpmyadmin.APP}

WORKLOADS: Registry = Registry({w.name: w for w in (
    *(w for app in APPLICATIONS.values() for w in _real(app)),
    Workload("static-page", _usage("a few KB of lorem-ipsum HTML (index.html, as in S5)",
                                   "static-page", SIZED_PAGE), static_page,
             _one("/index.html"), param=SIZED_PAGE),
    Workload("portal-page", _usage("a 126,237-byte portal front page: navigation, teasers, "
                                   "tables (S2's compression case)", "portal-page",
                                   SIZED_PORTAL), portal_page, _one("/portal.html"),
             param=SIZED_PORTAL),
    Workload("editor-page", _usage("S2's HTML minification, before: a 65,864-byte page (the "
                                   "size of S2's CIDE page) as a WYSIWYG editor of 2007 "
                                   "wrote it: font tags, inline styles, nested layout "
                                   "tables, spacer GIFs, template comments, indentation",
                                   "editor-page", SIZED_EDITOR), editor.editor_page,
             _one(editor.EDITOR_PATH), param=SIZED_EDITOR),
    Workload("editor-page-min", _usage("S2's HTML minification, after: editor-page with its "
                                       "formatting rewritten into CSS classes, then minified "
                                       "(minify-html). Its stylesheet /editor.css is deployed "
                                       "but not requested: a browser fetches it once and "
                                       "caches it, so bytes per response are the page's "
                                       "alone (with the stylesheet counted once it is still "
                                       "smaller)", "editor-page-min", SIZED_EDITOR_MIN),
             editor.minified_page, _one(editor.MIN_PATH), param=SIZED_EDITOR_MIN),
    Workload("file-100k", "a 100 KiB static file of random bytes (S4's Apache vs lighttpd)",
             file_100k, _one("/100k.bin")),
    Workload("picture", "picture.png, ~565 KB (S5's picture object)", media.picture,
             _one("/picture.png")),
    Workload("portal-site", "portal-page with its stylesheet, two scripts and nine images "
             "(~225 KB beside the page): the load asks for the page; the page view loads it "
             "as a browser does, first and repeat view (S2's Expires case)", portal_site,
             _one(SITE_PATH)),
    Workload("photos", "60 JPEG photos, 30 large + 30 small, average ~323 KB, all equally "
             "likely (S1's static test)", media.photos, media.PHOTO_URLS),
    Workload("large-files", "S1's large-file set scaled down: 4×1, 4×5, 4×10 and 1×25 MB of "
             "random bytes (89 MB), requested in the study's proportions",
             media.large_files(media.LARGE_SMALL), media.large_urls(media.LARGE_SMALL)),
    Workload("large-files-full", "S1's full large-file set: 250×1, 250×5, 250×10 and 60×25 MB "
             "(5.5 GB, more than most page caches hold); generated once per docroot",
             media.large_files(media.LARGE_FULL), media.large_urls(media.LARGE_FULL)),
    Workload("large-files-sized", _usage("S1's large-file set in its proportions (1, 5, 10 "
                                         "and 25 MB files), scaled to SIZE in total: e.g. "
                                         "twice a machine profile's memory",
                                         "large-files-sized", SIZED_LARGE),
             media.large_files(media.scaled(SIZED_LARGE.default)),
             media.large_urls(media.scaled(SIZED_LARGE.default)), param=SIZED_LARGE,
             mix=lambda total: (media.large_urls(media.scaled(total)), None)),
    Workload("php-page", _usage("a PHP page that requires a ~54 KB generated library and "
                                "renders a table: PHP start-up plus compile, where OPcache "
                                "matters", "php-page", SIZED_LIBRARY),
             php_page, _one("/index.php"), needs=PHP, param=SIZED_LIBRARY),
    Workload("php-cpu", _usage("CPU-bound PHP: an md5 chain of 20,000 rounds per request",
                               "php-cpu", CPU_ROUNDS),
             php_cpu, _one("/cpu.php"), needs=PHP, param=CPU_ROUNDS),
    Workload("php-index", "a near-empty index.php: PHP start-up cost only (S1 test 1)",
             pages.php_index, _one("/index.php"), needs=PHP),
    Workload("php-blank", "<?php echo 1; (S3's blank page, S4's print)", pages.php_blank,
             _one("/blank.php"), needs=PHP),
    Workload("php-simple", "S5's simple.php: a loop of 100 echoes, then phpinfo()",
             pages.php_simple, _one("/simple.php"), needs=PHP,
             varying_length=frozenset({"/simple.php"})),
    Workload("php-session", "starts a session and counts visits: a new session per "
             "cookie-less request (S3's session case)", pages.php_session,
             _one("/session.php"), needs=PHP, cacheable=0.0),   # no-store and Set-Cookie
    Workload("php-cacheable", "a page with Cache-Control, Last-Modified and ETag that "
             "answers conditional GETs with 304 (S4's HTTP caching)", pages.php_cacheable,
             _one("/cacheable.php"), needs=PHP, cacheable=1.0),
    Workload("php-uncacheable", "php-cacheable's page and body sent as session_start() "
             "sends it: Cache-Control no-store, no-cache, must-revalidate; Pragma no-cache; "
             "an Expires in the past (what S1 advised against)", pages.php_uncacheable,
             _one("/uncacheable.php"), needs=PHP, cacheable=0.0),
    Workload("php-cache-mix", _usage("php-cacheable's and php-uncacheable's pages, half of "
                                     "the requests each: a cache in front hits about half",
                                     "php-cache-mix", CACHE_PERCENT),
             pages.php_cache_mix, CACHE_MIX_URLS, needs=PHP, param=CACHE_PERCENT,
             cacheable=CACHE_MIX_SHARE, mix=pages.cache_mix),
    Workload("php-output-cache", "S4's output cache in the app: serve the cached file if "
             "newer than its source, else render and write it", pages.php_output_cache,
             _one("/cached.php"), needs=PHP, writable=(pages.OUTPUT_CACHE_DIR,)),
    Workload("php-output-uncached", "php-output-cache's page rendered on every request: "
             "the same source without the cache (S4's comparison)", pages.php_output_cache,
             _one("/cached-source.php"), needs=PHP, writable=(pages.OUTPUT_CACHE_DIR,)),
    Workload("perl-page", "a Perl page that builds a 100-row table (S2's Perl CGI case)",
             perl_page, _one("/index.pl"), needs=PERL),
    Workload("app-index", "the model application's near-empty index.php (S1 test 1)",
             app.app_files, _one("/index.php"), needs=APP, database=app.database),
    Workload("app-show", "the model application: latest 50 articles with authors, the same "
             "rows every time (S1 test 2, the query cache's case)", app.app_files,
             _one("/showArticle.php?show=1"), needs=APP, database=app.database),
    Workload("app-id", "the model application: 5 random articles, ids chosen in PHP "
             "(S1 test 3)", app.app_files, _one("/showArticle.php?id=1"), needs=APP,
             database=app.database, varying_length=app.VARYING),
    Workload("app-tree", "the model application: the article tree to depth 2, fetched "
             "recursively (S1 test 4)", app.app_files, _one("/showArticle.php?tree=1"),
             needs=APP, database=app.database),
    Workload("app-show-cacheable", "app-show's page sending Cache-Control: public, "
             "max-age=300 (&cache=1): a cache in front may store it", app.app_files,
             _one(app.SHOW_CACHEABLE), needs=APP, database=app.database, cacheable=1.0),
    Workload("app-tree-cacheable", "app-tree's page sending Cache-Control: public, "
             "max-age=300 (&cache=1): a cache in front may store it", app.app_files,
             _one(app.TREE_CACHEABLE), needs=APP, database=app.database, cacheable=1.0),
    Workload("app-mix", "the model application's four URLs, equally likely (S1 tests 1-4)",
             app.app_files, app.URLS, needs=APP, database=app.database,
             varying_length=app.VARYING),
    Workload("dir", "your own site: dir:PATH copies the directory PATH (relative to the "
             "experiment file) into the run; every file is a URL, static files checked by "
             "their bytes, PHP scripts by their status", lambda seed: [], (), own=own_dir),
)})

def deploy(name: str, docroot: Path, seed: int = 1) -> Deployed:
    """Deploy the workload `name` (with its parameter, if any) under docroot: deploy.py."""
    return deploy_workload(WORKLOADS[name], docroot, seed)


__all__ = ["Deployed", "File", "Param", "Registry", "Tree", "Url", "WORKLOADS", "Workload",
           "canonical", "deploy", "gzip_named", "php_log_path", "place"]
