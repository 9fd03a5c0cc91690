"""Static corpora, generated deterministically from a seed."""

from __future__ import annotations

import random

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
    from . import File
    rng = random.Random(seed)
    return [File("/index.html", html_page(rng, "stacklab static page", 6, 80))]


def check_page() -> bytes:
    """stacklab's own small HTML page for knob checks (gzip, keep-alive), in every docroot."""
    return html_page(random.Random(0), "stacklab check page", 4, 60)
