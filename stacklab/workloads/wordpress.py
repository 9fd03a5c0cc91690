"""WordPress 6.1 as a workload (issue 24): Debian's package deployed into the docroot with
its default theme (Twenty Twenty-Three), stacklab's own wp-config.php
(wordpress_site.py), and a database WordPress's installer made and the seed filled
(wordpress_seed.py). Plain permalinks (?p=ID): no rewrite rules, so every handler serves
the same URLs.

Every page is checked for seeded content: the latest post's title on the front page,
the REST API's post list and the logged-in post list, a post's title and one of its
comments, the title of a post a search word was put in. The anonymous pages send no
Cache-Control (WordPress sends none to a visitor): their cacheable share is left to each
cache's own rules, as for the other PHP pages. The logged-in page sends no-cache, and its
Cookie passes any cache that honours cookies: cacheable 0, a hit on it is a FAIL.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..measure.verify import Expect
from .files import File, Tree, Url
from .realapp import AppDatabase, AppPage, RealApp, package_version
from .wordpress_seed import FIRST_POST_ID, SEARCH_WORDS, Content, install, make_content
from .wordpress_site import SOURCE, login_cookie, site_config

PACKAGES = ("wordpress", "wordpress-theme-twentytwentythree")
SIZES = (("posts", 200), ("pages", 10), ("comments_max", 8))
N_POSTS = dict(SIZES)["posts"]
POSTS = tuple(FIRST_POST_ID + i for i in (N_POSTS // 2, N_POSTS // 3, N_POSTS - 7,
                                          N_POSTS // 5, 2 * N_POSTS // 3))
FRONT, REST, ADMIN = "/", "/?rest_route=/wp/v2/posts", "/wp-admin/edit.php"
SEARCHES = tuple(f"/?s={w}" for w in SEARCH_WORDS)
COOKIE = (("Cookie", login_cookie()),)
# Tables WordPress's installer makes, with the rows the seeding at least leaves.
TABLES = {"wp_posts": N_POSTS, "wp_comments": 1, "wp_options": 100, "wp_users": 1,
          "wp_usermeta": 1, "wp_terms": 8, "wp_term_relationships": N_POSTS}


def _post(post_id: int) -> str:
    return f"/?p={post_id}"


@lru_cache(maxsize=4)
def content(seed: int) -> Content:
    sizes = dict(SIZES)
    return make_content(seed, sizes["posts"], sizes["pages"], sizes["comments_max"])


def _version() -> str:
    return "+".join(package_version(p) for p in PACKAGES)


def files(seed: int) -> list:
    """The package's tree (its wp-config.php and Debian's .htaccess, which read /etc,
    left out), our wp-config.php, and each page's URL with the seeded text it must show."""
    site = content(seed)
    latest = site.latest.title.encode()
    urls = [Url(FRONT, Expect(contains=latest)),
            Url(REST, Expect(contains=b'"rendered":"' + latest + b'"',
                             content_type="application/json")),
            Url(ADMIN, Expect(contains=latest, headers=COOKIE))]
    for post_id in POSTS:
        post = site.post(post_id)
        shown = post.comments[0][2] if post.comments else post.title
        urls.append(Url(_post(post_id), Expect(contains=shown.encode())))
    for word, path in zip(SEARCH_WORDS, SEARCHES):
        urls.append(Url(path, Expect(contains=site.post(site.search[word][0]).title.encode())))
    return [Tree(Path(SOURCE), _version(), skip=("wp-config.php", ".htaccess")),
            File("/wp-config.php", site_config(database(seed))), *urls]


def database(seed: int) -> AppDatabase:
    return AppDatabase("wordpress", seed, _version(), SIZES, install, TABLES,
                       pages=(FRONT, _post(POSTS[0]), SEARCHES[0], REST))


def _one(path: str) -> tuple[tuple[str, int], ...]:
    return ((path, 1),)


# What users ask of a blog: mostly the front page and posts, some searches, the API.
MIX = ((FRONT, 30), *((_post(p), 8) for p in POSTS), *((s, 5) for s in SEARCHES),
       (REST, 15))

APP = RealApp(pages=(
    AppPage("wordpress-front", "WordPress 6.1: the front page, the latest 10 of 200 seeded "
            "posts (Twenty Twenty-Three, a block theme)", _one(FRONT)),
    AppPage("wordpress-post", "WordPress 6.1: a single post with its comments (?p=ID)",
            _one(_post(POSTS[0]))),
    AppPage("wordpress-search", "WordPress 6.1: a search (?s=word) over 200 posts",
            _one(SEARCHES[0])),
    AppPage("wordpress-rest", "WordPress 6.1: the REST API's post list "
            "(?rest_route=/wp/v2/posts, JSON)", _one(REST)),
    AppPage("wordpress-admin", "WordPress 6.1: the logged-in administrator's post list "
            "(/wp-admin/edit.php, a login cookie with every request; never cacheable)",
            _one(ADMIN), headers=COOKIE, cacheable=0.0),
    AppPage("wordpress", "WordPress 6.1: the anonymous pages as visitors ask them (front "
            "30%, five posts 40%, three searches 15%, REST 15%)", MIX),
), files=files, database=database, packages=PACKAGES)
