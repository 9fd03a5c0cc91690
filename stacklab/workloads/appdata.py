"""The model application's data (S1's fillDatabase.php), generated from a seed.

50 authors; articles with a title of 2–10 words, a summary of 25–50, a body of 500–1,500
lorem-ipsum words, a random author and publication time, and a place in one random binary
tree (parent, left, right; 0 = none). Pure functions of the description: the same seed
gives the same rows, byte for byte.

An AppDatabase is what a database component (one that provides database:mysql) is handed
to create and check: its schema, its rows as files to load, and what each page of the
application asks of it. The component knows nothing else of the application.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .static import WORDS

EPOCH = datetime(2008, 1, 1, tzinfo=timezone.utc)
YEAR_S = 365 * 24 * 3600


@dataclass(frozen=True)
class AppDatabase:
    """What the model application's database holds; the mariadb component creates it."""

    seed: int
    authors: int = 50
    articles: int = 10_000
    name: str = "stacklab_app"     # database
    user: str = "stacklab"         # the application's account (socket, password below)
    password: str = "stacklab"
    grants: str = "SELECT"
    exact: bool = True             # every row is generated here: the counts are exact

    @property
    def key(self) -> str:
        """Identifies the content (a seeded datadir is reused only for the same key)."""
        text = f"v1:{self.seed}:{self.authors}:{self.articles}:{self.name}:{self.user}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def tables(self) -> dict[str, int]:
        """Rows each table must hold."""
        return {"articles": self.articles, "authors": self.authors}

    def schema(self, engine: str) -> str:
        """CREATE TABLE statements (MySQL) for these tables in `engine`."""
        return SCHEMA.format(engine=engine)

    def write_rows(self, directory: Path) -> dict[str, Path]:
        """Each table's rows as a file for LOAD DATA, in load order."""
        files = {"authors": directory / "authors.tsv", "articles": directory / "articles.tsv"}
        write_tsv(self, files["authors"], files["articles"])
        return files

    def page_queries(self) -> dict[str, int]:
        """Statements per page of the application: the connection's own (its COM_QUIT
        counts in Questions), two counts on every page, then the page's own."""
        tree_rows = len(subtree(self, root(self))) if self.articles else 0
        return {"/showArticle.php?show=1": 1 + 2 + 1,
                "/showArticle.php?id=1": 1 + 2 + (5 if self.articles else 0),
                "/showArticle.php?tree=1": 1 + 2 + 1 + tree_rows}

    # A page whose statements are the same texts, reading the same rows, every time: the
    # query cache's case (S1 test 2).
    cacheable_page = "/showArticle.php?show=1"

    def install(self, socket: Path, engine: str, log_dir: Path) -> None:
        """Nothing to run: the schema and rows above are the whole database."""


SCHEMA = """CREATE TABLE authors (
  id INT UNSIGNED NOT NULL PRIMARY KEY,
  name VARCHAR(100) NOT NULL
) ENGINE={engine};
CREATE TABLE articles (
  id INT UNSIGNED NOT NULL PRIMARY KEY,
  title VARCHAR(255) NOT NULL,
  summary TEXT NOT NULL,
  body MEDIUMTEXT NOT NULL,
  author INT UNSIGNED NOT NULL,
  published DATETIME NOT NULL,
  parent INT UNSIGNED NOT NULL,
  `left` INT UNSIGNED NOT NULL,
  `right` INT UNSIGNED NOT NULL,
  KEY published (published),
  KEY author (author),
  KEY parent (parent)
) ENGINE={engine};
"""


@dataclass(frozen=True)
class Article:
    id: int
    title: str
    summary: str
    body: str
    author: int
    published: str     # 'YYYY-MM-DD HH:MM:SS'
    parent: int        # 0: the root
    left: int          # 0: no child
    right: int


def _words(rng: random.Random, pool: list[str], lo: int, hi: int) -> str:
    """lo..hi words: a random slice of a pre-drawn pool (fast for 10 M words)."""
    n = rng.randint(lo, hi)
    start = rng.randrange(len(pool) - n)
    text = " ".join(pool[start:start + n])
    return text[:1].upper() + text[1:]


def authors(db: AppDatabase) -> list[tuple[int, str]]:
    rng = random.Random(f"authors:{db.seed}")
    return [(i, " ".join(w.capitalize() for w in rng.sample(WORDS, 2)))
            for i in range(1, db.authors + 1)]


def tree(db: AppDatabase) -> dict[int, tuple[int, int, int]]:
    """id -> (parent, left, right): every article hangs under a random earlier one that
    still has a free child slot; ids are shuffled so the root is a random article."""
    rng = random.Random(f"tree:{db.seed}")
    ids = list(range(1, db.articles + 1))
    rng.shuffle(ids)
    links = {i: [0, 0, 0] for i in ids}
    open_slots = ids[:1]
    for child in ids[1:]:
        k = rng.randrange(len(open_slots))
        parent = open_slots[k]
        node = links[parent]
        free = [side for side in (1, 2) if node[side] == 0]
        node[free[rng.randrange(len(free))]] = child
        links[child][0] = parent
        if node[1] and node[2]:
            open_slots[k] = open_slots[-1]
            open_slots.pop()
        open_slots.append(child)
    return {i: (p, left, right) for i, (p, left, right) in links.items()}


def root(db: AppDatabase) -> int:
    return next((i for i, (p, _, _) in tree(db).items() if p == 0), 0)


def articles(db: AppDatabase):
    """Yield the articles in id order."""
    rng = random.Random(f"articles:{db.seed}")
    pool = rng.choices(WORDS, k=4000)
    links = tree(db)
    for i in range(1, db.articles + 1):
        published = EPOCH + timedelta(seconds=rng.randrange(YEAR_S))
        parent, left, right = links[i]
        yield Article(i, _words(rng, pool, 2, 10), _words(rng, pool, 25, 50) + ".",
                      _words(rng, pool, 500, 1500) + ".", rng.randint(1, max(db.authors, 1)),
                      published.strftime("%Y-%m-%d %H:%M:%S"), parent, left, right)


def subtree(db: AppDatabase, start: int, depth: int = 2) -> list[tuple[int, int]]:
    """(depth, id) of `start` and its descendants to `depth`, in the page's order."""
    links = tree(db)
    out = []

    def walk(i: int, d: int) -> None:
        out.append((d, i))
        if d < depth:
            for child in links[i][1:]:
                if child:
                    walk(child, d + 1)
    if start:
        walk(start, 0)
    return out


def write_tsv(db: AppDatabase, authors_path, articles_path) -> None:
    """Rows for LOAD DATA (tab-separated; no field holds a tab, newline or backslash)."""
    with open(authors_path, "w") as f:
        f.writelines(f"{i}\t{name}\n" for i, name in authors(db))
    with open(articles_path, "w") as f:
        f.writelines(f"{a.id}\t{a.title}\t{a.summary}\t{a.body}\t{a.author}\t{a.published}\t"
                     f"{a.parent}\t{a.left}\t{a.right}\n" for a in articles(db))
