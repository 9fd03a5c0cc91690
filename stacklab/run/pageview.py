"""First view and repeat view of a page, as a browser with a cache makes them.

The load engine fetches every URL on every request whatever the caching headers say, so
it cannot see what Expires or Cache-Control max-age spare a returning visitor. This loads
the workload's page once with an empty cache (the first view) and once more through the
same cache (the repeat view), WebPageTest's two rows, and counts per view the requests
that went over the wire and the bytes received.

- The cache is CacheControl's (RFC 9111 rules on requests), not ours: a fresh entry is
  served without a request; a stale one with a validator is revalidated with a
  conditional GET, which a 304 answers.
- Subresources are those a browser fetches to render: <img src>, <link rel=stylesheet
  href> and <script src>, of the page's own origin, found with html.parser.
- The repeat view revalidates the page itself (Cache-Control: max-age=0, as a browser's
  reload asks, and as a page whose HTML carries no lifetime is checked on every visit):
  S2 put its Expires on images, CSS and JavaScript, not on the page. Its subresources
  follow the cache's rules.
- Bytes are counted as read off the connection: status line, headers and body, chunked
  framing included, before any content decoding (TLS's own bytes are not HTTP's and are
  not counted).
- Only the page's own origin (the address the engine targets: loopback or the lab's own
  namespace) is ever asked: a redirect elsewhere and a subresource elsewhere are counted,
  never followed.
"""

from __future__ import annotations

import http.client
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from cachecontrol import CacheControlAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ..netlab.thread import in_netns

if TYPE_CHECKING:
    from ..workloads import Deployed

PAGE_SUFFIXES = (".html", ".htm")
MAX_REDIRECTS = 5
HEADERS = {"User-Agent": "stacklab-pageview", "Accept": "*/*",
           "Accept-Encoding": "gzip, deflate"}


class _Subresources(HTMLParser):
    """The URLs a browser fetches to render a page, in document order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v for k, v in attrs if v is not None}
        rel = a.get("rel", "").lower().split()
        url = (a.get("src") if tag in ("img", "script")
               else a.get("href") if tag == "link" and "stylesheet" in rel else None)
        if url and url.strip() and not url.strip().startswith(("data:", "#")):
            self.urls.append(url.strip())

    handle_startendtag = handle_starttag


def subresources(html: str) -> list[str]:
    """The page's images, stylesheets and scripts as written (relative or absolute), each
    once, in document order."""
    parser = _Subresources()
    parser.feed(html)
    parser.close()
    return list(dict.fromkeys(parser.urls))


def page_of(urls: tuple[tuple[str, int], ...], docroot: Path) -> str | None:
    """The workload's page that has subresources of its own in the docroot (the first
    such HTML URL), or None: a page view means nothing for a lone file."""
    for path, _ in urls:
        if not path.endswith(PAGE_SUFFIXES):
            continue
        try:
            html = (docroot / path.lstrip("/")).read_text(errors="replace")
        except OSError:
            continue
        for url in subresources(html):
            parts = urlsplit(urljoin("http://page" + path, url))
            if parts.netloc == "page" and (docroot / parts.path.lstrip("/")).is_file():
                return path
    return None


@dataclass(frozen=True)
class View:
    """One view's traffic: `requests` sent over the wire (`revalidated` of them
    conditional GETs answered 304), `bytes` received, `from_cache` answered by the
    cache with nothing sent, `failed` answers other than 200/304."""

    requests: int = 0
    revalidated: int = 0
    bytes: int = 0
    from_cache: int = 0
    failed: int = 0


@dataclass(frozen=True)
class PageViews:
    page: str                       # the page's URL path
    subresources: int               # of its own origin, fetched in each view
    first: View
    repeat: View
    offsite: int = 0                # subresources elsewhere: counted, never fetched
    error: str | None = None        # the view could not be made (nothing is measured)

    def record(self) -> dict:
        """As the run stores it (resources["_pageview"])."""
        return asdict(self)


@dataclass
class _Wire:
    """What went over the connections of one session: responses and bytes read."""

    responses: list[int] = field(default_factory=list)     # status codes
    bytes: int = 0


class _Counted:
    """A response's socket file that counts what the HTTP parser reads from it."""

    def __init__(self, fp, wire: _Wire):
        self._fp, self._wire = fp, wire

    def _count(self, data):
        self._wire.bytes += len(data)
        return data

    def read(self, *a):
        return self._count(self._fp.read(*a))

    def read1(self, *a):
        return self._count(self._fp.read1(*a))

    def readline(self, *a):
        return self._count(self._fp.readline(*a))

    def readinto(self, b):
        n = self._fp.readinto(b)
        self._wire.bytes += n or 0
        return n

    def __getattr__(self, name):          # peek, close, closed, fileno …
        return getattr(self._fp, name)


def _counting_pools(wire: _Wire) -> dict[str, type]:
    """urllib3 pool classes whose connections count every response and its bytes."""

    class Response(http.client.HTTPResponse):
        def __init__(self, sock, *a, **kw):
            super().__init__(sock, *a, **kw)
            self.fp = _Counted(self.fp, wire)

        def begin(self):
            super().begin()
            wire.responses.append(self.status)

    class Plain(HTTPConnection):
        response_class = Response

    class Secure(HTTPSConnection):
        response_class = Response

    return {"http": type("Pool", (HTTPConnectionPool,), {"ConnectionCls": Plain}),
            "https": type("Pool", (HTTPSConnectionPool,), {"ConnectionCls": Secure})}


class _Browser:
    """A requests session behind CacheControl's in-memory cache, counting the wire."""

    def __init__(self, base_url: str, timeout_s: float):
        self.origin = urlsplit(base_url)[:2]
        self.timeout_s = timeout_s
        self.wire = _Wire()
        adapter = CacheControlAdapter(max_retries=0)
        adapter.poolmanager.pool_classes_by_scheme = _counting_pools(self.wire)
        self.session = requests.Session()
        self.session.trust_env = False           # no proxy from the environment
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def own(self, url: str) -> bool:
        return urlsplit(url)[:2] == self.origin

    def get(self, url: str, revalidate: bool = False) -> requests.Response:
        """GET through the cache, following redirects within the origin only."""
        headers = {**HEADERS, **({"Cache-Control": "max-age=0"} if revalidate else {})}
        for _ in range(MAX_REDIRECTS + 1):
            r = self.session.get(url, headers=headers, timeout=self.timeout_s,
                                 allow_redirects=False, verify=False)  # the lab's cert
            _ = r.content                         # read: the cache stores it, bytes count
            target = r.headers.get("Location")
            if not r.is_redirect or not target or not self.own(urljoin(url, target)):
                return r
            url = urljoin(url, target)
        return r

    def view(self, page_url: str, revalidate_page: bool) -> tuple[View, int, int]:
        """One view: the page, then each subresource of its origin once; the view, the
        number of own subresources and of those elsewhere."""
        sent, wired = len(self.wire.responses), self.wire.bytes
        hits, failed = 0, 0

        def fetch(url: str, revalidate: bool = False) -> requests.Response:
            nonlocal hits, failed
            before = len(self.wire.responses)
            r = self.get(url, revalidate)
            hits += len(self.wire.responses) == before      # nothing went over the wire
            failed += r.status_code != 200
            return r

        page = fetch(page_url, revalidate_page)
        html = (page.content.decode(page.encoding or "utf-8", errors="replace")
                if page.status_code == 200 else "")
        urls = [urljoin(page.url, u) for u in subresources(html)]
        own = [u for u in dict.fromkeys(urls) if self.own(u)]
        for url in own:
            fetch(url)
        statuses = self.wire.responses[sent:]
        return (View(requests=len(statuses), revalidated=statuses.count(304),
                     bytes=self.wire.bytes - wired, from_cache=hits, failed=failed),
                len(own), len(urls) - len(own))

    def close(self) -> None:
        self.session.close()


def page_views(base_url: str, page: str, timeout_s: float = 5.0) -> PageViews:
    """The first and the repeat view of `page` (a URL path) on the server at `base_url`
    (the address the load engine targets). A failure to connect or a broken answer is
    the record's `error`: the run is not judged by it."""
    browser = _Browser(base_url, timeout_s)
    url = urljoin(base_url, page)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            first, own, offsite = browser.view(url, revalidate_page=False)
            repeat, _, _ = browser.view(url, revalidate_page=True)
    except (requests.RequestException, OSError, http.client.HTTPException,
            LookupError) as e:                  # LookupError: a charset Python lacks
        return PageViews(page, 0, View(), View(), error=f"{type(e).__name__}: {e}")
    finally:
        browser.close()
    return PageViews(page, own, first, repeat, offsite)


@dataclass(eq=False)
class PageViewLayer:
    """A page's first and repeat view (page_views) as a layer of a run (stacklab.run.layers),
    inside the measurement: taken when entered, after the measured window, from where the
    engine runs (`netns`, read then, as are the stack's `base_url` and the `deployed`
    workload). None: the workload has no page with subresources, and the record says
    nothing."""

    base_url: Callable[[], str]
    deployed: Callable[[], Deployed]
    netns: Callable[[], str | None]
    name = "pageview"
    waits = False
    views: dict | None = None

    @classmethod
    def problem(cls, knobs: dict[str, dict]) -> str | None:
        return None

    @contextmanager
    def entered(self) -> Iterator[dict | None]:
        deployed = self.deployed()
        if page := page_of(deployed.urls, deployed.docroot):
            with in_netns(self.netns()):
                self.views = page_views(self.base_url(), page).record()
        yield self.views

    def verdicts(self) -> tuple:
        return ()

    def record(self) -> dict:
        return {"_pageview": self.views} if self.views else {}
