"""WordPress's seeded content, and its installation: WordPress's own wp_install() run
with PHP's command line against the seeding server's socket, then the content inserted
with WordPress's own functions (wp_insert_post, wp_insert_comment, wp_insert_term), so
the tables hold what a site made by WordPress holds.

The content is made here, from the seed (the PHP side only inserts it): the pages'
markers (titles the front page, a post, a search and the REST API must show) are known
to the workload without asking the database. Post ids are fixed (import_id) and dates
too, and the installer's own sample post, page and comment go, so the front page's
latest posts are the seed's alone.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

from .realapp import AppDatabase, php_string, run_php
from .wordpress_site import EXPIRATION, PASSWORD_HASH, SESSION_VERIFIER, SOURCE, USER, config

FIRST_POST_ID = 1000
FIRST_PAGE_ID = 100
START = datetime(2024, 1, 1, 8, 0)
WORDS = ("amber river stone field morning harbor lantern meadow orchard quiet signal "
         "winter summer valley bridge candle garden market island journey kettle ladder "
         "marble needle ocean pepper quarry ribbon saddle timber velvet willow yarrow "
         "anchor basket cedar dune engine feather glacier hollow ivory jasper knot lumen "
         "mosaic nectar opal prairie quill raven silver thistle umber vessel wander").split()
# Words no generated text holds, each put in a few posts' titles: what a search finds.
SEARCH_WORDS = ("zephyrine", "quokkas", "brambleton")
SEARCH_HITS = 3                  # posts each search word is in (all on one result page)
CATEGORIES = ("News", "Travel", "Kitchen", "Garden", "Workshop", "Letters", "Music",
              "Science")
TAGS = tuple(f"{w}-{i}" for i, w in enumerate(WORDS[:30]))


@dataclass(frozen=True)
class Post:
    id: int
    title: str
    content: str
    date: str
    type: str                                # "post" or "page"
    categories: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    comments: tuple[tuple[str, str, str], ...] = ()   # (author, date, text)


@dataclass(frozen=True)
class Content:
    posts: tuple[Post, ...]
    pages: tuple[Post, ...]
    search: dict[str, tuple[int, ...]]       # word -> the ids of the posts that hold it

    def post(self, post_id: int) -> Post:
        return next(p for p in self.posts if p.id == post_id)

    @property
    def latest(self) -> Post:
        return max(self.posts, key=lambda p: p.date)


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _paragraphs(rng: random.Random) -> str:
    """Block-editor markup, as the editor saves a post."""
    return "\n\n".join(f"<!-- wp:paragraph -->\n<p>{_words(rng, rng.randint(40, 90))}.</p>"
                       "\n<!-- /wp:paragraph -->" for _ in range(rng.randint(3, 6)))


def make_content(seed: int, posts: int, pages: int, comments_max: int) -> Content:
    """The site's posts (each a unique title: words and its number), pages and comments,
    from the seed alone. Dates rise with the id, hours apart: the latest post is the last."""
    rng = random.Random(seed)
    found = {w: tuple(sorted(rng.sample(range(posts), SEARCH_HITS))) for w in SEARCH_WORDS}
    made = []
    for i in range(posts):
        date = START + timedelta(hours=6 * i, minutes=rng.randint(0, 300))
        extra = [w for w, hits in found.items() if i in hits]
        title = " ".join([_words(rng, rng.randint(3, 6)).capitalize(), *extra, str(i + 1)])
        comments = tuple((f"{_words(rng, 1).capitalize()} {_words(rng, 1).capitalize()}",
                          str(date + timedelta(hours=1 + c)),
                          _words(rng, rng.randint(8, 40)) + ".")
                         for c in range(rng.randint(0, comments_max)))
        made.append(Post(FIRST_POST_ID + i, title, _paragraphs(rng), str(date), "post",
                         tuple(rng.sample(CATEGORIES, rng.randint(1, 2))),
                         tuple(rng.sample(TAGS, rng.randint(0, 4))), comments))
    made_pages = tuple(Post(FIRST_PAGE_ID + i, f"{_words(rng, 2).capitalize()} page {i + 1}",
                            _paragraphs(rng), str(START + timedelta(days=i)), "page")
                       for i in range(pages))
    search = {w: tuple(FIRST_POST_ID + i for i in hits) for w, hits in found.items()}
    return Content(tuple(made), made_pages, search)


SEEDER = """
// stacklab's WordPress seeding: WordPress's own installer, then the content (argv[1]).
$_SERVER += ['HTTP_HOST' => 'localhost', 'REQUEST_URI' => '/', 'SERVER_NAME' => 'localhost',
             'SERVER_PORT' => '80', 'REQUEST_METHOD' => 'GET', 'SERVER_PROTOCOL' => 'HTTP/1.1'];
define('WP_INSTALLING', true);
require_once ABSPATH . 'wp-settings.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
$content = json_decode(file_get_contents($argv[1]), true, 512, JSON_THROW_ON_ERROR);
// Nothing leaves the seeding: wp_install() asks http://localhost/ (port 80, whatever
// answers there, a 5 s timeout) whether pretty permalinks work, and mails the new site's
// owner through sendmail. Every HTTP request is refused and every mail dropped here.
add_filter('pre_http_request', fn() => new WP_Error('stacklab_seeding', 'no HTTP while seeding'));
add_filter('pre_wp_mail', '__return_false');
$done = wp_install('stacklab WordPress', USER, 'stacklab@example.invalid', true, '',
                   'stacklab-unused-password');
$uid = $done['user_id'];
// The installer's sample content carries the install time: gone, so the site is the seed's.
wp_delete_post(1, true); wp_delete_post(2, true); wp_delete_post(3, true);
update_option('permalink_structure', '');
update_option('posts_per_page', 10);
update_option('blogdescription', 'seeded by stacklab');
wp_defer_term_counting(true);
wp_defer_comment_counting(true);
// The login cookie's parts (wordpress_site.py computes the cookie from the same).
$wpdb->update($wpdb->users, ['user_pass' => PASSWORD_HASH, 'display_name' => 'Stacklab Editor'],
              ['ID' => $uid]);
clean_user_cache($uid);
update_user_meta($uid, 'session_tokens', [SESSION_VERIFIER => [
    'expiration' => EXPIRATION, 'ip' => '127.0.0.1', 'ua' => 'stacklab', 'login' => 1704096000]]);
$terms = [];
foreach ($content['categories'] as $name) {
    $terms[$name] = wp_insert_term($name, 'category')['term_id'];
}
foreach (array_merge($content['pages'], $content['posts']) as $p) {
    $id = wp_insert_post(['import_id' => $p['id'], 'post_title' => $p['title'],
        'post_content' => $p['content'], 'post_status' => 'publish', 'post_type' => $p['type'],
        'post_date' => $p['date'], 'post_author' => $uid,
        'post_category' => array_map(fn($c) => $terms[$c], $p['categories']),
        'tags_input' => $p['tags'], 'comment_status' => 'open'], true);
    if (is_wp_error($id) || $id != $p['id']) {
        fwrite(STDERR, "post {$p['id']}: " . (is_wp_error($id) ? $id->get_error_message() : $id) . "\\n");
        exit(1);
    }
    foreach ($p['comments'] as [$author, $date, $text]) {
        wp_insert_comment(['comment_post_ID' => $id, 'comment_author' => $author,
            'comment_author_email' => 'reader@example.invalid', 'comment_content' => $text,
            'comment_date' => $date, 'comment_date_gmt' => $date, 'comment_approved' => 1]);
    }
}
wp_defer_term_counting(false);
wp_defer_comment_counting(false);
echo count($content['posts']), " posts, ", count($content['pages']), " pages\\n";
"""


def install(db: AppDatabase, socket: Path, engine: str, log_dir: Path) -> None:
    """The installer AppDatabase runs once per seeded datadir: wp_install() and the seed's
    content, against the seeding server on `socket`, with the package's own files."""
    sizes = dict(db.sizes)
    content = make_content(db.seed, sizes["posts"], sizes["pages"], sizes["comments_max"])
    data = log_dir / "wordpress-content.json"
    data.write_text(json.dumps({"posts": [asdict(p) for p in content.posts],
                                "pages": [asdict(p) for p in content.pages],
                                "categories": CATEGORIES}))
    head = config(db, php_string(f"{SOURCE}/"),
                  php_string(str(log_dir / "wordpress-seed.php.log")), "")
    consts = "".join(f"define('{n}', {v});\n" for n, v in (
        ("USER", php_string(USER)), ("PASSWORD_HASH", php_string(PASSWORD_HASH)),
        ("SESSION_VERIFIER", php_string(SESSION_VERIFIER)), ("EXPIRATION", EXPIRATION)))
    script = log_dir / "wordpress-seed.php"
    script.write_text(head + consts + SEEDER)
    run_php([str(script), str(data)], log_dir, socket, log_dir / "wordpress-seed.log",
            "wordpress-seed")
