"""PHP pages, generated deterministically, and stacklab's probe page."""

from __future__ import annotations

import random

from ..verify import Expect
from .static import WORDS

# Reports how PHP really runs (SAPI, process, OPcache, APCu) so verify can check claims.
PROBE = b"""<?php
$op = function_exists('opcache_get_status') ? @opcache_get_status(false) : false;
header('Content-Type: application/json');
header('Cache-Control: no-store');
echo json_encode([
    'sapi' => PHP_SAPI,
    'pid' => getmypid(),
    'uid' => function_exists('posix_geteuid') ? posix_geteuid() : null,
    'version' => PHP_VERSION,
    'opcache_enabled' => is_array($op) && !empty($op['opcache_enabled']),
    'opcache_hits' => is_array($op) ? $op['opcache_statistics']['hits'] : 0,
    'opcache_cached_scripts' => is_array($op) ? $op['opcache_statistics']['num_cached_scripts'] : 0,
    'apcu_enabled' => function_exists('apcu_enabled') && apcu_enabled(),
    'extensions' => get_loaded_extensions(),
    'ini' => [
        'expose_php' => ini_get('expose_php'),
        'register_argc_argv' => ini_get('register_argc_argv'),
        'realpath_cache_size' => ini_get('realpath_cache_size'),
        'session.auto_start' => ini_get('session.auto_start'),
        'zlib.output_compression' => ini_get('zlib.output_compression'),
        'opcache.validate_timestamps' => ini_get('opcache.validate_timestamps'),
        'opcache.memory_consumption' => ini_get('opcache.memory_consumption'),
    ],
]);
"""

MARKER = b"<!-- stacklab php-page ok -->"


def _library(rng: random.Random, functions: int) -> str:
    """A generated library: many small functions, so compiling it costs what OPcache saves."""
    out = ["<?php"]
    for i in range(functions):
        a, b = rng.randint(1, 97), rng.randint(1, 89)
        word = rng.choice(WORDS)
        out.append(f"function sl_f{i}(int $x): string {{\n"
                   f"    $y = ($x * {a} + {b}) % 1009;\n"
                   f"    return $y % 2 ? '{word}' . $y : strtoupper('{word}') . ($y + {i});\n}}")
    return "\n".join(out) + "\n"


def php_page(seed: int):
    from . import File
    rng = random.Random(seed)
    functions = 400
    page = (
        "<?php\nrequire __DIR__ . '/lib.php';\n"
        "$rows = [];\n"
        f"for ($i = 0; $i < 50; $i++) {{ $rows[] = call_user_func('sl_f' . ($i * 7 % {functions}), $i); }}\n"
        "?><!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>stacklab php page</title>"
        "</head><body><table>\n"
        "<?php foreach ($rows as $n => $r) { echo '<tr><td>', $n, '</td><td>', "
        "htmlspecialchars($r), \"</td></tr>\\n\"; } ?>\n"
        f"</table>{MARKER.decode()}</body></html>\n")
    return [File("/index.php", page.encode(), Expect(contains=MARKER)),
            File("/lib.php", _library(rng, functions).encode())]
