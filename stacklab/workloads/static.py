"""Static corpora, generated deterministically from a seed."""

from __future__ import annotations

import random

from .files import File

WORDS = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
         "incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud "
         "exercitation ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure "
         "in reprehenderit voluptate velit esse cillum eu fugiat nulla pariatur excepteur "
         "sint occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim "
         "id est laborum").split()


def lorem(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[:1].upper() + text[1:] + "."


def html_page(rng: random.Random, title: str, paragraphs: int, words: int) -> bytes:
    body = "\n".join(f"<p>{lorem(rng, words)}</p>" for _ in range(paragraphs))
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"</head>\n<body>\n<h1>{title}</h1>\n{body}\n</body></html>\n").encode()


def static_page(seed: int):
    rng = random.Random(seed)
    return [File("/index.html", html_page(rng, "stacklab static page", 6, 80))]


def sized_page(seed: int, size: int):
    """`static-page:SIZE`: lorem-ipsum HTML of exactly `size` bytes (600 B as in the
    classic small-file tests), its last paragraph cut to fit."""
    return [File("/index.html", sized_html(random.Random(seed), "stacklab static page", size))]


def sized_html(rng: random.Random, title: str, size: int) -> bytes:
    head = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"</head>\n<body>\n<h1>{title}</h1>\n")
    tail = "</body></html>\n"
    room = size - len(head) - len(tail)
    if room < 0:
        raise ValueError(f"{size} B is too small for an HTML page ({len(head + tail)} B)")
    parts = []
    while room > 0:
        paragraph = f"<p>{lorem(rng, 80)}</p>\n"
        if len(paragraph) > room:     # the last one: cut to fit (or newlines if tiny)
            paragraph = (f"<p>{paragraph[3:3 + room - 8]}</p>\n" if room >= 8
                         else "\n" * room)
        parts.append(paragraph)
        room -= len(paragraph)
    page = (head + "".join(parts) + tail).encode()
    assert len(page) == size, len(page)
    return page


def check_page() -> bytes:
    """stacklab's own small HTML page for knob checks (gzip, keep-alive), in every docroot."""
    return html_page(random.Random(0), "stacklab check page", 4, 60)


PORTAL_BYTES = 126_237   # S2's portal front page


def portal(seed: int, size: int = PORTAL_BYTES) -> bytes:
    """A portal front page: navigation, teaser boxes with links, a table; padded to size."""
    rng = random.Random(seed)
    nav = "".join(f'<li><a href="/section/{i}/">{lorem(rng, 2)[:-1]}</a></li>'
                  for i in range(40))
    head = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>stacklab portal"
            f"</title>\n<link rel=\"stylesheet\" href=\"/style.css\"></head>\n<body>\n"
            f"<div id=\"nav\"><ul>{nav}</ul></div>\n<div id=\"main\">\n")
    tail = "</div>\n</body></html>\n"
    parts, used, n = [head], len(head) + len(tail), 0
    while True:
        n += 1
        links = "".join(f'<li><a href="/article/{n}/{k}.html">{lorem(rng, 6)[:-1]}</a></li>'
                        for k in range(5))
        rows = "".join(f"<tr><td>{lorem(rng, 3)}</td><td>{rng.randint(1, 99999)}</td>"
                       f"<td>{rng.random():.2f}</td></tr>" for _ in range(3))
        box = (f'<div class="box" id="b{n}"><h2>{lorem(rng, 5)}</h2>\n<p>{lorem(rng, 60)}</p>\n'
               f"<ul>{links}</ul>\n<table>{rows}</table></div>\n")
        if used + len(box) > size - 16:
            break
        parts.append(box)
        used += len(box)
    pad = size - used - len("<!--  -->\n")
    parts.append(f"<!-- {'x' * pad} -->\n" if pad >= 0 else "")
    page = ("".join(parts) + tail).encode()
    assert len(page) == size, len(page)
    return page


def portal_page(seed: int, size: int = PORTAL_BYTES):
    """`portal-page` (S2's 126,237 B) or `portal-page:SIZE`: the same design at that size."""
    return [File("/portal.html", portal(seed, size))]


def file_100k(seed: int):
    return [File("/100k.bin", random.Random(seed).randbytes(100 * 1024))]
