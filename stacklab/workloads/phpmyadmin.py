"""phpMyAdmin 5.2 from Debian's package, logged in to a seeded database (S2's opcode-cache
page, issue 24).

The package's directory (/usr/share/phpmyadmin) is deployed as a Tree; what Debian points
out of it is replaced: `libraries/vendor_config.php` names /etc/phpmyadmin/config.inc.php
(which reads /etc/phpmyadmin/config-db.php and /var/lib/phpmyadmin/blowfish_secret.inc.php)
and /var/lib/phpmyadmin/tmp, so ours names the config.inc.php we write into the docroot
and a template cache there. Nothing under /etc or /var/lib is read. The PHP libraries
Debian unbundled (Twig, Symfony, the SQL parser) load from /usr/share/php through PHP's
default include_path, as on any Debian host.

The database is the model application's (appdata: the same authors and articles, the
same seeded datadir), browsed read-only.

Logged in by auth_type 'config', not by a session cookie: phpMyAdmin holds its PHP session
(a locked file) for almost the whole request, so a load sending one cookie would queue
every request behind that lock and measure the lock; with 'config' every request is the
logged-in user's, and each opens a session of its own as a new visitor's first request does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..measure.verify import Expect
from . import appdata
from .files import File, Tree, Url
from .realapp import AppPage, RealApp, package_version, php_error_log_lines, php_string

PACKAGE = "phpmyadmin"
SOURCE = Path("/usr/share/phpmyadmin")
TEMP_DIR = "/pma-tmp"            # TempDir: Twig's compiled templates, written by PHP
DB, TABLE = appdata.AppDatabase.name, "articles"

HOME = "/index.php?route=/"
BROWSE = f"/index.php?route=/sql&db={DB}&table={TABLE}&pos=0"
AUTHORS = f"/index.php?route=/sql&db={DB}&table=authors&pos=0"
STRUCTURE = f"/index.php?route=/database/structure&db={DB}"
PAGES_URLS = (HOME, BROWSE, AUTHORS, STRUCTURE)
HOME_MARK = f'title="Structure">{DB}</a>'.encode()
STRUCTURE_MARK = b'data-filter-row="AUTHORS"'


@dataclass(frozen=True)
class AdminDatabase(appdata.AppDatabase):
    """The model application's database as phpMyAdmin browses it: the same schema, rows
    and key (one seeded datadir for both), but phpMyAdmin's pages, whose statements are
    its own ("some": information_schema, SHOW, the browse query)."""

    def page_queries(self) -> dict[str, int | None]:
        # The browse pages read the tables; the start page and the structure read only
        # the server's metadata (under MyISAM no row at all), which the check would miss.
        return dict.fromkeys((BROWSE, AUTHORS))

    cacheable_page = None      # no page of phpMyAdmin sends the same statements twice


def database(seed: int) -> AdminDatabase:
    return AdminDatabase(seed)


def markers(db: appdata.AppDatabase) -> dict[str, bytes]:
    """What each page must show of the seeded rows: the first article's title (its
    first 40 characters: phpMyAdmin cuts text at LimitChars, 50), the first author's
    name; the database's structure and the start page show no row, so the seeded
    table's line and the database in the navigation tree (the login worked)."""
    first = next(appdata.articles(db))
    name = appdata.authors(db)[0][1]
    return {BROWSE: first.title[:40].encode(), AUTHORS: name.encode(),
            STRUCTURE: STRUCTURE_MARK, HOME: HOME_MARK}


# The vendor file Debian patched to point at /etc and /var/lib, pointed at the docroot.
VENDOR_CONFIG = b"""<?php
// Written by stacklab: Debian's vendor_config.php with its paths in the docroot.
declare(strict_types=1);
if (! defined('PHPMYADMIN')) {
    exit;
}
return [
    'autoloadFile' => ROOT_PATH . 'autoload.php',
    'tempDir' => ROOT_PATH . 'pma-tmp' . DIRECTORY_SEPARATOR,
    'changeLogFile' => '/usr/share/doc/phpmyadmin/changelog.gz',
    'licenseFile' => '/usr/share/doc/phpmyadmin/copyright',
    'sqlDir' => ROOT_PATH . 'sql' . DIRECTORY_SEPARATOR,
    'configFile' => ROOT_PATH . 'config.inc.php',
    'customHeaderFile' => ROOT_PATH . 'config.header.inc.php',
    'customFooterFile' => ROOT_PATH . 'config.footer.inc.php',
    'versionCheckDefault' => false,
    'localePath' => ROOT_PATH . 'locale' . DIRECTORY_SEPARATOR,
    'cacheDir' => ROOT_PATH . 'libraries' . DIRECTORY_SEPARATOR . 'cache' . DIRECTORY_SEPARATOR,
    'versionSuffix' => '',
];
"""


# phpMyAdmin's own error handler keeps PHP's warnings in a list for its error-report
# form (which SendErrorReports 'never' does not even show) and returns true, so PHP never
# logs them: a warning would leave no trace verification sees. Ours runs phpMyAdmin's,
# then returns false, so PHP logs it as it logs any other application's. Set once: the
# configuration may be read twice in a request.
CHAINED_HANDLER = """if (! defined('STACKLAB_PHP_ERRORS_LOGGED')) {
    define('STACKLAB_PHP_ERRORS_LOGGED', true);
    $stacklabPmaHandler = set_error_handler(null);
    set_error_handler(static function (int $no, string $text, string $file, int $line)
            use ($stacklabPmaHandler): bool {
        if ($stacklabPmaHandler !== null) {
            $stacklabPmaHandler($no, $text, $file, $line);
        }
        return false;
    });
}
"""


def config(db: appdata.AppDatabase, secret: str) -> bytes:
    """config.inc.php: logged in as the application's account over the socket php.ini
    names (the running mariadb's), no version check, no configuration-storage lookups
    or warnings, PHP's errors (phpMyAdmin's handler's too) to the log beside the
    docroot."""
    return f"""<?php
// Written by stacklab for one docroot; do not edit.
{php_error_log_lines()}{CHAINED_HANDLER}$cfg['blowfish_secret'] = {php_string(secret)};
$cfg['Servers'][1]['auth_type'] = 'config';
$cfg['Servers'][1]['host'] = 'localhost';
$cfg['Servers'][1]['socket'] = (string) ini_get('mysqli.default_socket');
$cfg['Servers'][1]['user'] = {php_string(db.user)};
$cfg['Servers'][1]['password'] = {php_string(db.password)};
$cfg['ServerDefault'] = 1;
$cfg['TempDir'] = __DIR__ . {php_string(TEMP_DIR)};
$cfg['VersionCheck'] = false;
$cfg['SendErrorReports'] = 'never';
$cfg['ZeroConf'] = false;
$cfg['PmaNoRelation_DisableWarning'] = true;
$cfg['ServerLibraryDifferenceDisableWarning'] = true;
$cfg['LoginCookieValidityDisableWarning'] = true;
$cfg['CheckConfigurationPermissions'] = false;
""".encode()


def files(seed: int) -> list:
    db = database(seed)
    secret = hashlib.sha256(f"phpmyadmin:{seed}".encode()).hexdigest()[:32]
    want = markers(db)
    return [Tree(SOURCE, package_version(PACKAGE), skip=("libraries/vendor_config.php", "doc")),
            File("/libraries/vendor_config.php", VENDOR_CONFIG, check=False),
            File("/config.inc.php", config(db, secret), check=False),
            *(Url(path, Expect(contains=marker)) for path, marker in want.items())]


# Every page carries a fresh session's token and the query's time: lengths vary.
VARYING = frozenset(PAGES_URLS)

APP = RealApp(
    pages=(
        AppPage("phpmyadmin-browse", "phpMyAdmin 5.2 (Debian's package), logged in: the "
                "first 25 rows of the model application's articles table, the table browse "
                "page (S2's opcode-cache page)", ((BROWSE, 1),), cacheable=0.0,
                varying=VARYING),
        AppPage("phpmyadmin-home", "phpMyAdmin 5.2, logged in: its start page (server, "
                "settings, the navigation tree)", ((HOME, 1),), cacheable=0.0,
                varying=VARYING),
        AppPage("phpmyadmin", "phpMyAdmin 5.2, logged in, as a user clicks through it: the "
                "start page, the database's structure, the articles browsed (twice as "
                "often) and the authors browsed", ((HOME, 1), (STRUCTURE, 1), (BROWSE, 2),
                                                  (AUTHORS, 1)),
                cacheable=0.0, varying=VARYING),
    ),
    files=files, database=database, writable=(TEMP_DIR,), packages=(PACKAGE,))
