"""PHP pages, generated deterministically."""

from __future__ import annotations

import hashlib
import random

from ..measure.verify import Expect
from .files import File
from .static import WORDS

MARKER = b"<!-- stacklab php-page ok -->"


def _function(i: int, a: int, b: int, word: str) -> str:
    return (f"function sl_f{i}(int $x): string {{\n"
            f"    $y = ($x * {a} + {b}) % 1009;\n"
            f"    return $y % 2 ? '{word}' . $y : strtoupper('{word}') . ($y + {i});\n}}")


def _call(i: int, a: int, b: int, word: str, x: int) -> str:
    """What sl_f{i}(x) returns, computed here so that the page's output is known exactly."""
    y = (x * a + b) % 1009
    return f"{word}{y}" if y % 2 else f"{word.upper()}{y + i}"


def _library(rng: random.Random, functions: int | None = None,
             size: int | None = None) -> tuple[str, list[tuple[int, int, str]]]:
    """A generated library: many small functions, so compiling it costs what OPcache saves.
    Either so many functions, or as many as fit in `size` bytes (padded to exactly that)."""
    out, used, specs = ["<?php"], len("<?php\n"), []
    while functions is None or len(specs) < functions:
        a, b = rng.randint(1, 97), rng.randint(1, 89)
        word = rng.choice(WORDS)
        text = _function(len(specs), a, b, word)
        if size is not None and used + len(text) + 1 > size:
            break
        out.append(text)
        used += len(text) + 1
        specs.append((a, b, word))
    library = "\n".join(out) + "\n"
    if size is not None:        # a comment line (or blank lines) up to the exact size
        room = size - len(library)
        library += ("//" + "x" * (room - 3) + "\n") if room >= 3 else "\n" * room
    return library, specs


def php_page(seed: int, size: int | None = None):
    """`php-page` (a ~54 KB library of 400 functions) or `php-page:SIZE` (a library of
    exactly SIZE bytes, e.g. 680k for OPcache studies); the output is known exactly."""
    rng = random.Random(seed)
    library, specs = _library(rng, None if size else 400, size)
    functions = len(specs)
    page = (
        "<?php\nrequire __DIR__ . '/lib.php';\n"
        "$rows = [];\n"
        f"for ($i = 0; $i < 50; $i++) {{ $rows[] = call_user_func('sl_f' . ($i * 7 % {functions}), $i); }}\n"
        "?><!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>stacklab php page</title>"
        "</head><body><table>\n"
        "<?php foreach ($rows as $n => $r) { echo '<tr><td>', $n, '</td><td>', "
        "htmlspecialchars($r), \"</td></tr>\\n\"; } ?>\n"
        f"</table>{MARKER.decode()}</body></html>\n")
    rows = "".join(f"<tr><td>{n}</td><td>{_call(n * 7 % functions, *specs[n * 7 % functions], n)}"
                   "</td></tr>\n" for n in range(50))
    output = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>stacklab php page"
              f"</title></head><body><table>\n{rows}</table>{MARKER.decode()}</body></html>\n"
              ).encode()
    return [File("/index.php", page.encode(), _exact(output)),
            File("/lib.php", library.encode())]


CPU_MARKER = b"<!-- stacklab php-cpu ok -->"
CPU_ITERATIONS = 20_000


def php_cpu(seed: int, iterations: int = CPU_ITERATIONS):
    """`php-cpu[:N]`: CPU-bound PHP, an md5 chain of N rounds (20,000 unless N is given);
    the final digest is computed here too and checked byte for byte."""
    start = f"stacklab-{seed}"
    page = (f"<?php\n$h = '{start}';\n"
            f"for ($i = 0; $i < {iterations}; $i++) {{ $h = md5($h); }}\n"
            "echo \"<!DOCTYPE html>\\n<html><head><title>stacklab php-cpu</title></head><body>"
            f"<p>md5 x {iterations}: \", $h, \"</p>{CPU_MARKER.decode()}</body></html>\\n\";\n")
    digest = start
    for _ in range(iterations):
        digest = hashlib.md5(digest.encode()).hexdigest()
    output = (f"<!DOCTYPE html>\n<html><head><title>stacklab php-cpu</title></head><body>"
              f"<p>md5 x {iterations}: {digest}</p>{CPU_MARKER.decode()}</body></html>\n"
              ).encode()
    return [File("/cpu.php", page.encode(), _exact(output))]


def _exact(output: bytes) -> Expect:
    return Expect(hashlib.sha256(output).hexdigest(), len(output))
