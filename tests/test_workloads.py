"""Workloads: deterministic corpora of the studies' sizes, and the PHP pages served for real."""

import contextlib
import hashlib
import re
from dataclasses import replace
from pathlib import Path

import pytest

from stacklab.errors import StackError
from stacklab.host.net import Endpoint
from stacklab.stacks.base import Upstream
from stacklab.run.stack import RunningStack, start_stack, stop_stack, verify_stack
from stacklab.stacks import STACKS
from stacklab.stacks.php.ini import render_php_config
from stacklab.stacks.tls import make_certificate
from stacklab.measure.verify import Status, fetch
from stacklab.workloads import WORKLOADS, Deployed, deploy, media
from stacklab.workloads.appdata import AppDatabase, articles, authors, root, subtree, tree
from stacklab.workloads.static import PORTAL_BYTES

from test_stacks import assert_all_pass, knobs_for, run_stack
from helpers import shared_session

KB = 1000


def digests(deployed: Deployed) -> dict[str, str]:
    return {path: want.sha256 for path, want in deployed.expected.items()}


@pytest.mark.parametrize("name", ["static-page", "portal-page", "file-100k", "picture",
                                  "php-page", "php-cacheable"])
def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, name):
    a = deploy(name, tmp_path / "a", seed=1)
    b = deploy(name, tmp_path / "b", seed=1)
    deploy(name, tmp_path / "c", seed=2)
    files = lambda d: {p.relative_to(d): hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
                       for p in d.rglob("*") if p.is_file() and p.name != ".stacklab-corpus.json"}
    assert files(tmp_path / "a") == files(tmp_path / "b")
    assert files(tmp_path / "a") != files(tmp_path / "c")
    assert digests(a) == digests(b)


def test_model_data_is_a_function_of_the_seed():
    one, again, other = (AppDatabase(seed, articles=300) for seed in (1, 1, 2))

    def rows(db):
        return hashlib.sha256(repr((authors(db), list(articles(db)))).encode()).digest()
    assert rows(one) == rows(again) != rows(other)
    assert one.key == again.key != other.key


def test_model_data_has_the_studys_shape():
    db = AppDatabase(7, articles=2000)
    rows = list(articles(db))
    assert len(rows) == 2000 and len(authors(db)) == 50
    for a in rows:
        assert 2 <= len(a.title.split()) <= 10
        assert 25 <= len(a.summary.split()) <= 50
        assert 500 <= len(a.body.split()) <= 1500
        assert 1 <= a.author <= 50
    links = tree(db)
    roots = [i for i, (parent, _, _) in links.items() if parent == 0]
    assert len(roots) == 1
    for i, (parent, left, right) in links.items():
        for child in (left, right):
            assert child == 0 or links[child][0] == i
        assert parent == 0 or i in links[parent][1:]
    seen, todo = set(), [roots[0]]           # one tree: every article reachable from the root
    while todo:
        i = todo.pop()
        seen.add(i)
        todo += [c for c in links[i][1:] if c]
    assert len(seen) == 2000
    top = subtree(db, root(db))
    assert top[0] == (0, roots[0]) and all(d <= 2 for d, _ in top) and 1 < len(top) <= 7


def test_corpora_have_the_studies_sizes(tmp_path):
    sizes = lambda d: {path: want.length for path, want in d.expected.items()}  # noqa: E731
    assert sizes(deploy("portal-page", tmp_path / "p")) == {"/portal.html": PORTAL_BYTES}
    assert sizes(deploy("file-100k", tmp_path / "f")) == {"/100k.bin": 102_400}
    picture = sizes(deploy("picture", tmp_path / "i"))["/picture.png"]
    assert abs(picture - 565 * KB) < 0.02 * 565 * KB
    photos = deploy("photos", tmp_path / "ph")
    assert len(photos.urls) == 60 and {w for _, w in photos.urls} == {1}
    assert sum("/large/" in p for p, _ in photos.urls) == 30
    mean = sum(sizes(photos).values()) / 60
    assert 300 * KB < mean < 350 * KB
    assert (tmp_path / "ph/photos/large/00.jpg").read_bytes()[:3] == b"\xff\xd8\xff"


@pytest.mark.parametrize("name, path, size", [
    ("static-page:600", "/index.html", 600),
    ("static-page:1m", "/index.html", 1024 * 1024),
    ("portal-page:26k", "/portal.html", 26 * 1024),
    ("php-page:680k", "/lib.php", 680 * 1024),
])
def test_sized_workloads_are_exactly_their_size_and_a_function_of_the_seed(tmp_path, name,
                                                                          path, size):
    a, b = deploy(name, tmp_path / "a", seed=1), deploy(name, tmp_path / "b", seed=1)
    deploy(name, tmp_path / "c", seed=2)
    read = lambda d: (d / path.lstrip("/")).read_bytes()  # noqa: E731
    assert len(read(tmp_path / "a")) == size
    assert read(tmp_path / "a") == read(tmp_path / "b") != read(tmp_path / "c")
    assert digests(a) == digests(b)
    assert all(want.sha256 for want in a.expected.values())     # checked byte for byte


def test_a_bare_name_keeps_its_bytes_and_a_value_it_already_means_is_the_bare_name(tmp_path):
    from stacklab.workloads import canonical
    assert canonical("portal-page:126237") == "portal-page"
    assert canonical("php-cpu:20000") == "php-cpu"
    assert canonical("portal-page:26624") == canonical("portal-page:26K") == "portal-page:26k"
    assert digests(deploy("portal-page:126237", tmp_path / "p")) == digests(
        deploy("portal-page", tmp_path / "q"))
    assert sizes_of(deploy("static-page", tmp_path / "s")) == {"/index.html": 3306}
    assert "static-page:600" in WORKLOADS and "static-page:1" not in WORKLOADS
    assert "photos:3" not in WORKLOADS and all(":" not in name for name in WORKLOADS)
    assert WORKLOADS["php-page:680k"].needs == ("php",)


def sizes_of(deployed: Deployed) -> dict[str, int]:
    return {path: want.length for path, want in deployed.expected.items()}


@pytest.mark.parametrize("name", ["php-page", "php-page:2k", "php-page:680k", "php-cpu:1000"])
def test_php_pages_print_exactly_what_their_expect_says(tmp_path, name):
    """The expected bytes are computed in Python; PHP itself (the CLI) must agree."""
    import subprocess
    deployed = deploy(name, tmp_path / "d", seed=3)
    (path, want), = deployed.expected.items()
    out = subprocess.run(["php", "-n", str(tmp_path / "d" / path.lstrip("/"))],
                         capture_output=True, check=True, timeout=60).stdout
    assert (len(out), hashlib.sha256(out).hexdigest()) == (want.length, want.sha256)


def test_text_files_have_a_gzip_copy_beside_them(tmp_path):
    import gzip
    deploy("portal-page:26k", tmp_path / "p")
    original = (tmp_path / "p/portal.html").read_bytes()
    copy = (tmp_path / "p/portal.html.gz").read_bytes()
    assert gzip.decompress(copy) == original and len(copy) < len(original) / 3
    assert (tmp_path / "p/_stacklab/check.html.gz").is_file()
    deploy("file-100k", tmp_path / "f")
    assert not (tmp_path / "f/100k.bin.gz").exists()


def test_workloads_name_the_urls_whose_length_varies(tmp_path):
    assert deploy("app-mix", tmp_path / "a").varying_length == {"/showArticle.php?id=1"}
    assert deploy("app-show", tmp_path / "s").varying_length == frozenset()
    assert deploy("php-simple", tmp_path / "p").varying_length == {"/simple.php"}


def test_large_files_keep_the_studys_proportions(tmp_path):
    deployed = deploy("large-files", tmp_path / "l")
    on_disk = {p.name: p.stat().st_size for p in (tmp_path / "l/files").iterdir()
               if p.suffix == ".bin"}
    assert sum(on_disk.values()) <= 100 * media.MB
    assert sorted({s // media.MB for s in on_disk.values()}) == [1, 5, 10, 25]
    assert len(deployed.urls) == len(on_disk) == 13 and len(deployed.expected) == 13
    full = WORKLOADS["large-files-full"].urls
    count = lambda size: sum(f"/{size}m-" in p for p, _ in full)  # noqa: E731
    assert [count(s) for s in (1, 5, 10, 25)] == [250, 250, 250, 60]
    assert media.LARGE_FULL.total_mb > 5000


def test_big_corpora_are_generated_once_per_docroot_and_seed(tmp_path, monkeypatch):
    first = deploy("photos", tmp_path / "d", seed=3)

    def fail(*args):
        raise AssertionError("regenerated")
    monkeypatch.setattr(media, "jpeg", fail)
    assert digests(deploy("photos", tmp_path / "d", seed=3)) == digests(first)
    with pytest.raises(AssertionError, match="regenerated"):
        deploy("photos", tmp_path / "d", seed=4)


def test_php_ini_takes_backends_from_upstreams(tmp_path):
    knobs = knobs_for("nginx+php-fpm")["php"]
    sock = tmp_path / "mariadb.sock"
    ini = render_php_config(tmp_path, knobs, [Upstream("mariadb", Endpoint("127.0.0.1", 1, sock),
                                                       ("database:mysql",))])
    assert f'mysqli.default_socket = "{sock}"' in ini["php.ini"]
    assert "extension=mysqli.so" in ini["conf.d/extensions.ini"]
    minimal = dict(knobs, extensions="minimal", session_handler="memcached")
    ini = render_php_config(tmp_path, minimal, [Upstream("memcached", Endpoint(
        "127.0.0.1", 11311), ("sessions:memcached",))])
    assert 'session.save_path = "127.0.0.1:11311"' in ini["php.ini"]
    assert ini["conf.d/extensions.ini"].split() == [
        "zend_extension=opcache.so", "extension=igbinary.so", "extension=msgpack.so",
        "extension=memcached.so"]
    with pytest.raises(StackError, match="needs a stack with memcached"):
        render_php_config(tmp_path, minimal, [])


# --- the PHP pages against real nginx + PHP-FPM on loopback ---------------------------

PHP_PAGES = ["php-index", "php-blank", "php-simple", "php-session", "php-cacheable",
             "php-output-cache", "php-output-uncached"]


session = shared_session()


@contextlib.contextmanager
def running(session, stack: str, deployed: Deployed, **overrides):
    """A started stack for several requests; always stopped."""
    run_dir = session.run_dir(f"run-{len(list(session.dir.iterdir()))}")
    stack_run = RunningStack(STACKS[stack])
    try:
        start_stack(stack_run, knobs_for(stack, **overrides), deployed, run_dir,
                    make_certificate(session.dir), session.run_dir("cache"))
        yield stack_run
    finally:
        assert stop_stack(stack_run) == []


def deploy_together(names, docroot: Path) -> Deployed:
    """Several workloads in one docroot (their files do not collide)."""
    parts = [deploy(name, docroot) for name in names]
    expected = {p: e for d in parts for p, e in d.expected.items()}
    return replace(parts[-1], name="+".join(names), expected=expected,
                   urls=tuple(u for d in parts for u in d.urls))


@pytest.mark.integration
def test_php_pages_return_what_they_should(session):
    deployed = deploy_together(PHP_PAGES, session.run_dir("docroot-php-pages"))
    with running(session, "nginx+php-fpm", deployed) as stack:
        assert_all_pass(verify_stack(stack, deployed))
        ep = stack.front.endpoint
        assert fetch(ep, "/blank.php").body == b"1"
        simple = fetch(ep, "/simple.php").body
        assert simple.startswith(b"0 1 2 ") and b"99 " in simple and b"phpinfo()" in simple
        first = fetch(ep, "/session.php")
        cookie = first.headers["set-cookie"].split(";")[0]
        again = fetch(ep, "/session.php", {"Cookie": cookie})
        assert b"visits: 1" in first.body and b"visits: 2" in again.body

        page = fetch(ep, "/cacheable.php")
        assert page.status == 200 and "public" in page.headers["cache-control"]
        etag, modified = page.headers["etag"], page.headers["last-modified"]
        assert fetch(ep, "/cacheable.php", {"If-None-Match": etag}).status == 304
        assert fetch(ep, "/cacheable.php", {"If-Modified-Since": modified}).status == 304
        assert fetch(ep, "/cacheable.php", {"If-None-Match": '"other"'}).status == 200
        assert fetch(ep, "/cacheable.php", {"If-Modified-Since":
                                            "Mon, 01 Jan 2001 00:00:00 GMT"}).status == 200

        # verify_stack fetched it once already: the output is cached by the server user.
        cached = fetch(ep, "/cached.php")
        assert cached.headers["x-output-cache"] == "HIT"
        written = deployed.docroot / "_cache" / "cached.html"
        assert written.read_bytes() == cached.body
        assert written.stat().st_uid != 0 or stack.front.ctx.user is None
        written.unlink()
        assert fetch(ep, "/cached.php").headers["x-output-cache"] == "MISS"
        # php-output-uncached: the same page, rendered on every request
        rendered = fetch(ep, "/cached-source.php")
        assert "x-output-cache" not in rendered.headers
        assert rendered.body == written.read_bytes()


@pytest.mark.integration
def test_sessions_in_memcached(session):
    verdicts = run_stack(session, "nginx+php-fpm+memcached", "php-session")
    assert_all_pass(verdicts)
    memcached = next(v for v in verdicts if v.component == "memcached")
    assert memcached.status is Status.PASS and "stored" in memcached.detail


@pytest.mark.integration
def test_static_corpora_are_served_byte_exact(session):
    verdicts = run_stack(session, "nginx", "photos")
    assert_all_pass(verdicts)
    assert sum(bool(re.match(r"stack:content /photos/", f"{v.component}:{v.check}"))
               for v in verdicts) == 60


def test_the_large_file_set_scales_to_a_size_in_s1s_proportions():
    """Twice a 512 MiB profile's memory, without S1's 5.5 GB on every filesystem: every
    size is there, the total near the value, the load over every file."""
    from stacklab.workloads import WORKLOADS, media
    for total_mb in (64, 1024, 2048):
        spec = media.scaled(total_mb * media.MB)
        assert [size for size, _ in spec.counts] == [1, 5, 10, 25]
        assert all(count >= 1 for _, count in spec.counts)
        assert abs(spec.total_mb - total_mb) <= max(40, 0.05 * total_mb), spec
    workload = WORKLOADS["large-files-sized:2048m"]
    assert len(workload.urls) == sum(c for _, c in media.scaled(2048 * media.MB).counts)
    assert WORKLOADS["large-files-sized:1024m"] is WORKLOADS["large-files-sized"]
