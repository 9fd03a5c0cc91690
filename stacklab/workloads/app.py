"""S1's model application: index.php, showArticle.php (show, id, tree) and lib.php.

PHP connects with mysqli to 'localhost', i.e. to the unix socket php.ini's
mysqli.default_socket names (rendered from the running mariadb component). Every page
sends `Server-Timing: db;dur=X, php;dur=Y` in ms: time in database calls, and the rest
of the script — S1's "overview method" split of one request. No page says whether a
cache may store it, unless asked with &cache=1 (see SHOW_CACHEABLE).
"""

from __future__ import annotations

from ..measure.verify import Expect
from .appdata import AppDatabase
from .files import File, Url

URLS = (("/index.php", 1), ("/showArticle.php?show=1", 1), ("/showArticle.php?id=1", 1),
        ("/showArticle.php?tree=1", 1))
VARYING = frozenset({"/showArticle.php?id=1"})   # 5 random articles: a different length
# The pages above send no Cache-Control, Expires or Last-Modified (no session, so no cache
# limiter either): whether a cache stores them is its default rules' choice. With &cache=1 a
# page sends `Cache-Control: public, max-age=300` (sl_finish, on success only): any shared
# cache may store it. Not for id=1, whose random rows a cache would freeze.
SHOW_CACHEABLE = "/showArticle.php?show=1&cache=1"
TREE_CACHEABLE = "/showArticle.php?tree=1&cache=1"


def marker(mode: str) -> bytes:
    return f"<!-- stacklab app {mode} ok -->".encode()


def database(seed: int) -> AppDatabase:
    return AppDatabase(seed)


INDEX = b"""<?php
$t0 = hrtime(true);
ob_start();
?><!DOCTYPE html>
<html><head><title>stacklab model application</title></head><body>
<p><a href="showArticle.php?show=1">latest</a> <a href="showArticle.php?id=1">random</a>
<a href="showArticle.php?tree=1">tree</a></p>
<!-- stacklab app index ok --></body></html>
<?php
header(sprintf('Server-Timing: db;dur=0, php;dur=%.3f', (hrtime(true) - $t0) / 1e6));
ob_end_flush();
"""

LIB = """<?php
// Connection and timing for the model application (S1's lib.php).
$SL_T0 = hrtime(true);
$SL_DB_NS = 0;
ob_start();

function sl_fail(string $why): void {
    ob_end_clean();
    http_response_code(500);
    header('Content-Type: text/plain');
    echo "stacklab app: $why\\n";
    exit;
}

function sl_db(): mysqli {
    static $db = null;
    global $SL_DB_NS;
    if ($db === null) {
        if (!class_exists('mysqli')) {
            sl_fail('the mysqli extension is not loaded');
        }
        mysqli_report(MYSQLI_REPORT_OFF);
        $t = hrtime(true);
        $db = @new mysqli('localhost', '%(user)s', '%(password)s', '%(name)s');
        $SL_DB_NS += hrtime(true) - $t;
        if ($db->connect_errno) {
            sl_fail('cannot connect to the database (mysqli.default_socket = '
                    . ini_get('mysqli.default_socket') . '): ' . $db->connect_error);
        }
    }
    return $db;
}

function sl_query(string $sql): array {
    global $SL_DB_NS;
    $db = sl_db();
    $t = hrtime(true);
    $result = $db->query($sql);
    $rows = $result instanceof mysqli_result ? $result->fetch_all(MYSQLI_ASSOC) : [];
    $SL_DB_NS += hrtime(true) - $t;
    if ($result === false) {
        sl_fail('query failed: ' . $db->error);
    }
    return $rows;
}

function sl_finish(): void {
    global $SL_T0, $SL_DB_NS;
    if (isset($_GET['cache'])) {     // the same page as a shared cache may store it
        header('Cache-Control: public, max-age=300');
    }
    $total = hrtime(true) - $SL_T0;
    header(sprintf('Server-Timing: db;dur=%%.3f, php;dur=%%.3f', $SL_DB_NS / 1e6,
                   ($total - $SL_DB_NS) / 1e6));
    ob_end_flush();
}

function h(string $s): string {
    return htmlspecialchars($s, ENT_QUOTES);
}
"""

SHOW = b"""<?php
require __DIR__ . '/lib.php';

const SL_SELECT = 'SELECT a.id, a.title, a.summary, a.published, u.name AS author
                   FROM articles a JOIN authors u ON u.id = a.author';

function sl_tree(int $id, int $depth): void {
    $rows = sl_query('SELECT id, title, summary, `left`, `right` FROM articles WHERE id = ' . $id);
    if (!$rows) {
        return;
    }
    $a = $rows[0];
    echo '<li data-id="', $a['id'], '" data-depth="', $depth, '"><b>', h($a['title']), '</b> ',
         h($a['summary']);
    if ($depth < 2 && ($a['left'] || $a['right'])) {
        echo "<ul>\\n";
        foreach ([$a['left'], $a['right']] as $child) {
            if ($child) {
                sl_tree((int) $child, $depth + 1);
            }
        }
        echo '</ul>';
    }
    echo "</li>\\n";
}

$articles = (int) sl_query('SELECT COUNT(*) AS n FROM articles')[0]['n'];
$authors = (int) sl_query('SELECT COUNT(*) AS n FROM authors')[0]['n'];
echo "<!DOCTYPE html>\\n<html><head><meta charset=\\"utf-8\\"><title>stacklab articles</title>",
     "</head><body>\\n<p class=\\"counts\\">articles: $articles, authors: $authors</p>\\n";
if (isset($_GET['show'])) {
    $mode = 'show';
    foreach (sl_query(SL_SELECT . ' ORDER BY a.published DESC LIMIT 50') as $a) {
        echo '<div class="article" data-id="', $a['id'], '"><h2>', h($a['title']), '</h2><p>',
             h($a['summary']), '</p><p>', $a['published'], ' by ', h($a['author']), "</p></div>\\n";
    }
} elseif (isset($_GET['id'])) {
    $mode = 'id';
    for ($i = 0; $i < 5 && $articles > 0; $i++) {
        $id = mt_rand(1, $articles);   // S1: ids chosen in PHP (ORDER BY RAND() was too slow)
        foreach (sl_query(str_replace('a.published,', 'a.published, a.body,', SL_SELECT)
                          . ' WHERE a.id = ' . $id) as $a) {
            echo '<div class="article" data-id="', $a['id'], '"><h2>', h($a['title']),
                 '</h2><p>', h($a['summary']), '</p><div>', h($a['body']), '</div><p>',
                 $a['published'], ' by ', h($a['author']), "</p></div>\\n";
        }
    }
} elseif (isset($_GET['tree'])) {
    $mode = 'tree';
    $root = isset($_GET['root']) ? (int) $_GET['root']
          : (int) (sl_query('SELECT id FROM articles WHERE parent = 0 LIMIT 1')[0]['id'] ?? 0);
    echo "<ul class=\\"tree\\">\\n";
    sl_tree($root, 0);
    echo "</ul>\\n";
} else {
    $mode = 'none';
    echo '<p>show=1, id=1 or tree=1</p>';
}
echo "<!-- stacklab app $mode ok --></body></html>\\n";
sl_finish();
"""


def app_files(seed: int):
    db = database(seed)
    lib = LIB % {"user": db.user, "password": db.password, "name": db.name}
    return [File("/index.php", INDEX, Expect(contains=marker("index"))),
            File("/lib.php", lib.encode()),
            File("/showArticle.php", SHOW),
            *(Url(path, Expect(contains=marker(path.split("?")[1].split("=")[0])))
              for path in (*(p for p, _ in URLS[1:]), SHOW_CACHEABLE, TREE_CACHEABLE))]
