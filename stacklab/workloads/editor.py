"""S2's HTML minification as two workloads: a page as a WYSIWYG editor of the study's time
wrote it (editor-page), and the same page with its formatting moved into a stylesheet and
then minified (editor-page-min).

S2: editors such as Dreamweaver write much redundant code that can often be cut by up to
50% without harm; formatting belongs in CSS files, which a browser loads once, so the
server sends the formatting once. The minified page is derived from the editor page, never
written separately: `ToCss` rewrites every formatting attribute, inline style and <font>
into a class of a stylesheet (our code), then minify-html removes comments, inter-tag
whitespace, optional closing tags and quotes (a maintained minifier, not our regexes).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from html import escape
from html.parser import HTMLParser

import minify_html

from .files import File
from .static import lorem

EDITOR_BYTES = 65_864        # S2's mater.html (CIDE), the study's mid-sized page
EDITOR_PATH, MIN_PATH, CSS_PATH = "/editor.html", "/editor-min.html", "/editor.css"

# --- the page as the editor wrote it ------------------------------------------------------

FACE = "Verdana, Arial, Helvetica, sans-serif"
DOCTYPE = ('<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" '
           '"http://www.w3.org/TR/html4/loose.dtd">')
BODY = ('<body bgcolor="#FFFFFF" leftmargin="0" topmargin="0" marginwidth="0" '
        'marginheight="0" onLoad="MM_preloadImages(\'images/nav_on.gif\')">')
HEAD = f"""{DOCTYPE}
<html><!-- InstanceBegin template="/Templates/main.dwt" codeOutsideHTMLIsLocked="false" -->
<head>
<!-- InstanceBeginEditable name="doctitle" -->
<title>Aktualno&#347;ci &#8211; Firma Sp. z o.o.</title>
<!-- InstanceEndEditable -->
<meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<script language="JavaScript" type="text/JavaScript">
<!--
function MM_swapImgRestore() {{ //v3.0
  var i,x,a=document.MM_sr; for(i=0;a&&i<a.length&&(x=a[i])&&x.oSrc;i++) x.src=x.oSrc;
}}
function MM_preloadImages() {{ //v3.0
  var d=document; if(d.images){{ if(!d.MM_p) d.MM_p=new Array();
    var i,j=d.MM_p.length,a=MM_preloadImages.arguments; for(i=0; i<a.length; i++)
    if (a[i].indexOf("#")!=0){{ d.MM_p[j]=new Image; d.MM_p[j++].src=a[i];}}}}
}}
function MM_findObj(n, d) {{ //v4.01
  var x; if(!d) d=document; if(!(x=d[n])&&d.all) x=d.all[n];
  if(!x && d.getElementById) x=d.getElementById(n); return x;
}}
function MM_swapImage() {{ //v3.0
  var i,j=0,x,a=MM_swapImage.arguments; document.MM_sr=new Array; for(i=0;i<(a.length-2);i+=3)
   if ((x=MM_findObj(a[i]))!=null){{document.MM_sr[j++]=x; if(!x.oSrc) x.oSrc=x.src; x.src=a[i+2];}}
}}
//-->
</script>
<!-- InstanceBeginEditable name="head" --><!-- InstanceEndEditable -->
</head>

{BODY}
"""
FOOT = """<!-- InstanceEnd --></html>
"""


def font(text: str, size: int, color: str, face: str = FACE) -> str:
    return f'<font face="{face}" size="{size}" color="{color}">{text}</font>'


def spacer(depth: int, height: int) -> list[tuple[int, str]]:
    """The editors' vertical gap: a one-cell table holding a transparent GIF."""
    return [(depth, '<table width="100%" border="0" cellspacing="0" cellpadding="0">'),
            (depth + 1, "<tr>"),
            (depth + 2, f'<td height="{height}"><img src="images/spacer.gif" width="1" '
                        f'height="{height}"></td>'),
            (depth + 1, "</tr>"), (depth, "</table>")]


def prose(rng: random.Random, words: int) -> str:
    """A paragraph's text with the odd bold phrase or link, as an author formatted it."""
    parts = lorem(rng, words).split(" ")
    if rng.random() < 0.5:
        i = rng.randrange(len(parts) - 3)
        parts[i:i + 3] = [f"<b>{' '.join(parts[i:i + 3])}</b>"]
    if rng.random() < 0.3:
        i = rng.randrange(len(parts) - 2)
        parts[i:i + 2] = [f'<a href="/oferta/{rng.randrange(100)}.html">'
                          f"{' '.join(parts[i:i + 2])}</a>"]
    return " ".join(parts)


def news_item(rng: random.Random, n: int, depth: int) -> list[tuple[int, str]]:
    date = f"2007-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    lines = [(depth, f"<!-- news item {n} -->"),
             (depth, '<table width="100%" border="0" cellspacing="0" cellpadding="3">'),
             (depth + 1, "<tr>"),
             (depth + 2, '<td bgcolor="#E8EEF4" style="border-bottom: 1px solid #CCCCCC">'
                         + font(f"<b>{lorem(rng, rng.randint(4, 9))[:-1]}</b>", 2, "#003366")
                         + "</td>"),
             (depth + 1, "</tr>"), (depth + 1, "<tr>"),
             (depth + 2, f"<td>{font(date, 1, '#666666')}</td>"),
             (depth + 1, "</tr>"), (depth + 1, "<tr>"), (depth + 2, "<td>")]
    for _ in range(rng.randint(2, 4)):
        lines.append((depth + 3, '<p style="margin-top: 0px; margin-bottom: 6px; '
                                 'text-align: justify">'
                                 + font(prose(rng, rng.randint(40, 90)), 2, "#333333")
                                 + "</p>"))
    lines += [(depth + 3, '<p align="right" style="margin-top: 0px; margin-bottom: 0px">'
                          + font(f'<a href="/aktualnosci/{n}.html">wi&#281;cej&nbsp;&raquo;'
                                 "</a>", 1, "#CC0000") + "</p>"),
              (depth + 2, "</td>"), (depth + 1, "</tr>"), (depth, "</table>"),
              *spacer(depth, 12)]
    return lines


def navigation(rng: random.Random) -> list[tuple[int, str]]:
    cells = []
    for i in range(8):
        if i:
            cells.append((5, f'<td>{font("|", 1, "#999999")}</td>'))
        link = f'<b><a href="/dzial/{i}/">{lorem(rng, 1)[:-1]}</a></b>'
        cells.append((5, f'<td nowrap>{font(link, 1, "#003366")}</td>'))
    return [(0, '<table width="760" border="0" align="center" cellpadding="0" '
                'cellspacing="0" bgcolor="#FFFFFF">'),
            (1, "<tr>"),
            (2, '<td width="760" height="90" bgcolor="#003366"><img src="images/logo.gif" '
                'width="300" height="90" border="0" alt="Firma Sp. z o.o."></td>'),
            (1, "</tr>"), (1, "<tr>"),
            (2, '<td height="24" bgcolor="#E8EEF4"><!-- top navigation -->'),
            (3, '<table border="0" cellspacing="0" cellpadding="4">'), (4, "<tr>"),
            *cells, (4, "</tr>"), (3, "</table></td>"), (1, "</tr>"), (1, "<tr>"),
            (2, '<td><table width="100%" border="0" cellspacing="0" cellpadding="0">'),
            (3, "<tr>")]


def left_menu(rng: random.Random) -> list[tuple[int, str]]:
    lines = [(4, '<td width="170" valign="top" bgcolor="#F2F2F2"><!-- left menu -->'),
             (5, '<table width="100%" border="0" cellspacing="0" cellpadding="2">')]
    for i in range(14):
        img = f"menu{i}"
        lines += [(6, "<tr>"),
                  (7, '<td height="22" style="border-bottom: 1px solid #CCCCCC">'
                      '<img src="images/arrow.gif" width="9" height="9" hspace="4" alt="">'
                      + font(f'<a href="/menu/{i}/" onMouseOut="MM_swapImgRestore()" '
                             f"onMouseOver=\"MM_swapImage('{img}','',"
                             f"'images/arrow_on.gif',1)\">"
                             f"{lorem(rng, rng.randint(1, 3))[:-1]}</a>", 1, "#003366")
                      + "</td>"),
                  (6, "</tr>")]
    return [*lines, (5, "</table>"), *spacer(5, 20), (4, "</td>"),
            (4, '<td width="10"><img src="images/spacer.gif" width="10" height="1"></td>'),
            (4, '<td width="400" valign="top"><!-- InstanceBeginEditable name="content" -->')]


def right_column(rng: random.Random) -> list[tuple[int, str]]:
    lines = [(4, "<!-- InstanceEndEditable --></td>"), (4, '<td width="10">&nbsp;</td>'),
             (4, '<td width="170" valign="top"><!-- right column -->')]
    for title in ("Newsletter", "Polecamy"):
        lines += [(5, '<table width="100%" border="0" cellspacing="0" cellpadding="4" '
                      'bgcolor="#F2F2F2">'),
                  (6, "<tr>"),
                  (7, f'<td bgcolor="#003366">{font(f"<b>{title}</b>", 1, "#FFFFFF")}</td>'),
                  (6, "</tr>")]
        for _ in range(5):
            lines += [(6, "<tr>"),
                      (7, f'<td>{font(lorem(rng, rng.randint(6, 14)), 1, "#333333")}</td>'),
                      (6, "</tr>")]
        lines += [(5, "</table>"), *spacer(5, 10)]
    return [*lines, (4, "</td>"), (3, "</tr>"), (2, "</table></td>"), (1, "</tr>"),
            (1, "<tr>"),
            (2, '<td height="30" bgcolor="#003366"><div align="center">'
                + font("&copy; 2007 Firma Sp. z o.o. Wszelkie prawa zastrze&#380;one.", 1,
                       "#CCCCCC") + "</div></td>"),
            (1, "</tr>"), (0, "</table>"), (0, "</body>")]


def render(lines: list[tuple[int, str]]) -> str:
    return "".join(f"{'  ' * depth}{text}\n" for depth, text in lines)


def editor_html(seed: int, size: int = EDITOR_BYTES) -> bytes:
    """The editor's page of exactly `size` bytes: its frame (head, navigation, menus,
    footer), news items while they fit, and a last paragraph cut to fill the rest."""
    rng = random.Random(seed)
    head = HEAD + render(navigation(rng) + left_menu(rng))
    tail = render(right_column(rng)) + FOOT
    last = render([(5, f'<p style="margin: 0px">{font("{}", 2, "#333333")}</p>')])
    # the last paragraph without its "{}", and at least one character of text in it
    room = size - len(head) - len(tail) - (len(last) - 2) - 1
    if room < 0:
        raise ValueError(f"{size} B is too small for the editor page "
                         f"({size - room} B at least)")
    items, n = [], 0
    while True:
        n += 1
        item = render(news_item(rng, n, 5))
        if len(item) > room:
            break
        items.append(item)
        room -= len(item)
    text = ""
    while len(text) <= room:
        text += lorem(rng, 80) + " "
    page = (head + "".join(items) + last.replace("{}", text[:room + 1]) + tail).encode()
    assert len(page) == size, (len(page), size)
    return page


# --- formatting into CSS, then minification -----------------------------------------------

def _px(value: str) -> str:
    return "0" if value == "0" else f"{value}px" if value.isdigit() else value


def _align(tag: str, value: str) -> dict[str, str]:
    if tag == "table":
        return ({"margin-left": "auto", "margin-right": "auto"} if value == "center"
                else {"float": value})
    if tag == "img":
        return {"float": value} if value in ("left", "right") else {"vertical-align": value}
    return {"text-align": value}


# HTML 4's presentational attributes and their CSS (tag, value -> declarations). A table's
# border above 0 also draws its cells' borders, which no one declaration on the table does:
# the editor page has only border="0".
FORMATTING = {
    "width": lambda tag, v: {"width": _px(v)},
    "height": lambda tag, v: {"height": _px(v)},
    "bgcolor": lambda tag, v: {"background-color": v},
    "background": lambda tag, v: {"background-image": f"url({v})"},
    "align": _align,
    "valign": lambda tag, v: {"vertical-align": v},
    "border": lambda tag, v: {"border": "0" if v == "0" else f"{_px(v)} solid"},
    "cellspacing": lambda tag, v: {"border-spacing": _px(v)},
    "nowrap": lambda tag, v: {"white-space": "nowrap"},
    "hspace": lambda tag, v: {"margin-left": _px(v), "margin-right": _px(v)},
    "vspace": lambda tag, v: {"margin-top": _px(v), "margin-bottom": _px(v)},
    "leftmargin": lambda tag, v: {"margin-left": _px(v)},
    "topmargin": lambda tag, v: {"margin-top": _px(v)},
    "marginwidth": lambda tag, v: {"margin-left": _px(v), "margin-right": _px(v)},
    "marginheight": lambda tag, v: {"margin-top": _px(v), "margin-bottom": _px(v)},
}
FONT_SIZES = {"1": "x-small", "2": "small", "3": "medium", "4": "large", "5": "x-large",
              "6": "xx-large", "7": "xxx-large", "-1": "smaller", "+1": "larger"}
FONT = {"face": lambda v: {"font-family": v}, "size": lambda v: {"font-size": FONT_SIZES[v]},
        "color": lambda v: {"color": v}}
LINK = f'<link rel="stylesheet" type="text/css" href="{CSS_PATH.lstrip("/")}">'


def _style(text: str) -> dict[str, str]:
    pairs = (d.partition(":") for d in text.split(";") if d.strip())
    return {p.strip().lower(): v.strip() for p, _, v in pairs}


class ToCss(HTMLParser):
    """Writes a page back with every formatting attribute, inline style and <font> made a
    class (one per distinct set of declarations, named in order of first use), and a link
    to the stylesheet in its head; everything else as it was, entities and all."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.out: list[str] = []
        self.classes: dict[tuple, str] = {}    # (declarations, cell padding) -> name

    def handle_starttag(self, tag, attrs):
        self.out.append(self._tag(tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.out.append(self._tag(tag, attrs))

    def handle_endtag(self, tag):
        if tag == "head":
            self.out.append(LINK)
        self.out.append(f"</{'span' if tag == 'font' else tag}>")

    def handle_data(self, data):
        self.out.append(data)

    def handle_entityref(self, name):
        self.out.append(f"&{name};")

    def handle_charref(self, name):
        self.out.append(f"&#{name};")

    def handle_comment(self, data):
        self.out.append(f"<!--{data}-->")

    def handle_decl(self, decl):
        self.out.append(f"<!{decl}>")

    def handle_pi(self, data):
        self.out.append(f"<?{data}>")

    def unknown_decl(self, data):
        self.out.append(f"<![{data}]]>")

    def _tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> str:
        kept, declarations, padding = [], {}, None
        for name, value in attrs:
            if tag == "font" and name in FONT:
                declarations.update(FONT[name](value))
            elif name == "style":
                declarations.update(_style(value or ""))
            elif name == "cellpadding":        # CSS sets it on the cells, not the table
                padding = _px(value)
            elif name in FORMATTING:
                declarations.update(FORMATTING[name](tag, value))
            else:
                kept.append((name, value))
        if declarations or padding is not None:
            key = (tuple(declarations.items()), padding)
            cls = self.classes.setdefault(key, f"s{len(self.classes)}")
            classes = [v for n, v in kept if n == "class"] + [cls]
            kept = [(n, v) for n, v in kept if n != "class"] + [("class", " ".join(classes))]
        elif tag != "font":
            return self.get_starttag_text()          # nothing to move: as it was written
        text = "".join(f" {n}" if v is None else f' {n}="{escape(v)}"' for n, v in kept)
        return f"<{'span' if tag == 'font' else tag}{text}>"

    def stylesheet(self) -> str:
        rules = []
        for (declarations, padding), name in self.classes.items():
            if declarations:
                rules.append(f".{name}{{{';'.join(f'{p}:{v}' for p, v in declarations)}}}")
            if padding is not None:
                rules.append(f".{name}>tbody>tr>*{{padding:{padding}}}")
        return "".join(f"{rule}\n" for rule in rules)


@dataclass(frozen=True)
class Minified:
    html: bytes
    css: bytes     # the stylesheet the page links to: fetched once, then cached


def minify(page: bytes) -> Minified:
    """The page with its formatting in a stylesheet, then minified by minify-html with
    its defaults: comments, inter-tag whitespace, optional tags and quotes removed,
    entities written as characters (the page is UTF-8); scripts left as they are."""
    rewrite = ToCss()
    rewrite.feed(page.decode())
    rewrite.close()
    html = minify_html.minify("".join(rewrite.out), keep_comments=False, minify_js=False)
    return Minified(html.encode(), rewrite.stylesheet().encode())


def editor_page(seed: int, size: int = EDITOR_BYTES):
    """`editor-page` or `editor-page:SIZE`: the page as the editor wrote it."""
    return [File(EDITOR_PATH, editor_html(seed, size))]


def minified_page(seed: int, size: int = EDITOR_BYTES):
    """`editor-page-min` or `editor-page-min:SIZE`: editor-page at that size, minified,
    and its stylesheet beside it (deployed, not requested by the load)."""
    done = minify(editor_html(seed, size))
    return [File(MIN_PATH, done.html), File(CSS_PATH, done.css)]
