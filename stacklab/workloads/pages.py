"""Small PHP pages from the studies: blank, simple, session, cacheable, output cache; and
the same page uncacheable, and a mix of the two at a chosen share, for a cache in front."""

from __future__ import annotations

import hashlib
import random

from ..measure.verify import Expect
from .files import File
from .static import html_page

INDEX_MARKER = b"<!-- stacklab php-index ok -->"
SIMPLE_MARKER = b"<!-- stacklab simple ok -->"
CACHEABLE_MARKER = b"<!-- stacklab cacheable ok -->"
OUTPUT_CACHE_MARKER = b"<!-- stacklab output-cache ok -->"
OUTPUT_CACHE_DIR = "/_cache"


def php_index(seed: int):
    page = (b"<?php /* stacklab: PHP start-up only */ ?><!DOCTYPE html>\n<html><head>"
            b"<title>stacklab</title></head><body>" + INDEX_MARKER + b"</body></html>\n")
    return [File("/index.php", page, Expect(contains=INDEX_MARKER))]


def php_blank(seed: int):
    return [File("/blank.php", b"<?php echo 1;",
                 Expect(hashlib.sha256(b"1").hexdigest(), 1))]


def php_simple(seed: int):
    page = (b"<?php\nfor ($i = 0; $i < 100; $i++) {\n    echo $i, \" \";\n}\n"
            b"echo \"" + SIMPLE_MARKER + b"\\n\";\nphpinfo();\n")
    return [File("/simple.php", page, Expect(contains=SIMPLE_MARKER))]


SESSION = b"""<?php
session_start();
$_SESSION['visits'] = ($_SESSION['visits'] ?? 0) + 1;
header('Cache-Control: no-store');
echo '<!DOCTYPE html><html><body><p>visits: ', $_SESSION['visits'], '</p>',
     '<!-- stacklab session ', session_id() !== '' ? 'ok' : 'none', ' --></body></html>', "\\n";
"""


def php_session(seed: int):
    # A request without a cookie is a new session: its first visit.
    return [File("/session.php", SESSION, Expect(contains=b"<p>visits: 1</p>"))]


# Validators from the script's own mtime and content: the same on every deployment.
CACHEABLE = b"""<?php
$body = file_get_contents(__DIR__ . '/cacheable.html');
$etag = '"' . md5($body) . '"';
$modified = getlastmod();
header('Cache-Control: public, max-age=300');
header('Last-Modified: ' . gmdate('D, d M Y H:i:s', $modified) . ' GMT');
header('ETag: ' . $etag);
$inm = $_SERVER['HTTP_IF_NONE_MATCH'] ?? null;
$ims = $_SERVER['HTTP_IF_MODIFIED_SINCE'] ?? null;
if ($inm !== null ? in_array($etag, array_map('trim', explode(',', $inm)), true)
                  : ($ims !== null && strtotime($ims) >= $modified)) {
    http_response_code(304);
    exit;
}
echo $body;
"""


# The same body, with what session_start() sends under PHP's default session.cache_limiter
# "nocache" (S1 advised sending cache-friendly headers instead): no shared cache stores it,
# and without validators there is nothing to answer a conditional GET with.
UNCACHEABLE = b"""<?php
header('Expires: Thu, 19 Nov 1981 08:52:00 GMT');
header('Cache-Control: no-store, no-cache, must-revalidate');
header('Pragma: no-cache');
echo file_get_contents(__DIR__ . '/cacheable.html');
"""


def _body(seed: int):
    body = html_page(random.Random(seed), "stacklab cacheable page", 8, 80)
    return File("/cacheable.html", body.replace(b"</body>", CACHEABLE_MARKER + b"</body>"))


def php_cacheable(seed: int):
    return [File("/cacheable.php", CACHEABLE, Expect(contains=CACHEABLE_MARKER)), _body(seed)]


def php_uncacheable(seed: int):
    return [File("/uncacheable.php", UNCACHEABLE, Expect(contains=CACHEABLE_MARKER)),
            _body(seed)]


def php_cache_mix(seed: int, percent: int | None = None):
    """Both pages, whatever the percent (a Workload's and a Param's build): which share of
    the load goes to which is cache_mix's."""
    return [*php_cacheable(seed), php_uncacheable(seed)[0]]


def cache_mix(percent: int) -> tuple[tuple[tuple[str, int], ...], float]:
    """The URLs of php-cache-mix at `percent` and the share a shared cache may store:
    `percent` of the request weight on the cacheable page, the rest on the uncacheable one
    (a URL of weight 0 is left out: the load never asks for it)."""
    urls = (("/cacheable.php", percent), ("/uncacheable.php", 100 - percent))
    return tuple((path, w) for path, w in urls if w), percent / 100


# S4: serve the cached output if it is newer than its source, else render and store it.
OUTPUT_CACHE = b"""<?php
$source = __DIR__ . '/cached-source.php';
$cache = __DIR__ . '/_cache/cached.html';
if (is_file($cache) && filemtime($cache) >= filemtime($source)) {
    header('X-Output-Cache: HIT');
    readfile($cache);
    exit;
}
ob_start();
include $source;
$out = ob_get_clean();
$tmp = $cache . '.' . getmypid();
if (file_put_contents($tmp, $out) !== false) {
    rename($tmp, $cache);
}
header('X-Output-Cache: MISS');
echo $out;
"""


def _source(rng: random.Random) -> bytes:
    """The expensive page behind the cache: a table of computed rows."""
    words = " ".join(f"'{w}'" for w in ("alpha", "beta", "gamma", "delta", "epsilon"))
    return (f"""<?php
$w = [{words.replace(" ", ", ")}];
echo "<!DOCTYPE html>\\n<html><head><title>stacklab output cache</title></head><body><table>\\n";
for ($i = 0; $i < 400; $i++) {{
    $h = md5($i . '{rng.randrange(1 << 30)}');
    printf("<tr><td>%d</td><td>%s</td><td>%s</td></tr>\\n", $i, $w[$i % 5], $h);
}}
echo "</table>{OUTPUT_CACHE_MARKER.decode()}</body></html>\\n";
""").encode()


def php_output_cache(seed: int):
    # the source page's last row appears only when PHP renders it (its text has printf)
    return [File("/cached.php", OUTPUT_CACHE, Expect(contains=OUTPUT_CACHE_MARKER)),
            File("/cached-source.php", _source(random.Random(seed)),
                 Expect(contains=b"<tr><td>399</td>"))]
