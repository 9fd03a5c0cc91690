"""S2's portal page with what a browser fetches beside it: its stylesheet, two scripts, a
logo and teaser images. The load asks for the page alone (as portal-page); the page view
(pageview.py) loads it as a browser does, subresources and all, to count what a cache
spares a returning visitor (S2's Expires headers)."""

from __future__ import annotations

import random

from .files import File
from .media import png
from .static import PORTAL_BYTES, lorem, portal

SITE_PATH = "/portal.html"
CSS_PATH = "/style.css"                  # the portal page already links it
SCRIPTS = ("/js/site.js", "/js/menu.js")
IMAGES = ("/img/logo.png", *(f"/img/teaser-{i}.png" for i in range(1, 9)))
TEASER_SIZE, LOGO_SIZE = (96, 72), (200, 50)   # ~21 KB and ~30 KB of PNG noise


def _css(rng: random.Random) -> bytes:
    rules = [f"#b{n} h2 {{ color: #{rng.randrange(1 << 24):06x}; margin: {n % 7}px 0; }}"
             for n in range(1, 120)]
    base = ("body { font: 13px Verdana, Arial, sans-serif; margin: 0 }\n"
            "#nav ul { list-style: none } #nav li { display: inline; padding: 0 4px }\n"
            ".box { float: left; width: 31%; margin: 0 1% 12px }\n")
    return (base + "\n".join(rules) + "\n").encode()


def _script(rng: random.Random, name: str, functions: int) -> bytes:
    body = "\n".join(f"function {name}{n}(el) {{ /* {lorem(rng, 12)} */ "
                     f"return el && el.setAttribute('data-{name}', '{n}'); }}"
                     for n in range(functions))
    return f"/* stacklab {name}.js */\n{body}\n".encode()


def _page(seed: int) -> bytes:
    """The portal page with script tags in its head and images above its boxes."""
    page = portal(seed, PORTAL_BYTES)
    scripts = "".join(f'<script src="{p}"></script>' for p in SCRIPTS)
    images = "".join(f'<img src="{p}" alt="">' for p in IMAGES)
    page = page.replace(b"</head>", f"{scripts}</head>".encode(), 1)
    return page.replace(b'<div id="main">\n', f'<div id="main">\n{images}\n'.encode(), 1)


def portal_site(seed: int):
    rng = random.Random(seed)
    files = [File(SITE_PATH, _page(seed)), File(CSS_PATH, _css(rng)),
             File(SCRIPTS[0], _script(rng, "site", 120)),
             File(SCRIPTS[1], _script(rng, "menu", 30))]
    for i, path in enumerate(IMAGES):
        width, height = LOGO_SIZE if i == 0 else TEASER_SIZE
        files.append(File(path, lambda i=i, w=width, h=height: png(seed * 100 + i, w, h)))
    return files
