"""WordPress's configuration as stacklab writes it (never Debian's, which reads
/etc/wordpress), and the logged-in user's cookies, computed as WordPress computes them.

The keys and salts are fixed (derived from one constant, not the seed): the load's
headers are the registry's, which knows no seed, so the login cookie sent with every
request of `wordpress-admin` must be valid for any seed's database. The cookie is valid
because the seeding stores what it is made of: the user's password hash (an MD5, which
WordPress still accepts, so the four characters the cookie's key takes from it are
fixed), and the session token's SHA-256 in the user's session_tokens meta.
"""

from __future__ import annotations

import hashlib
import hmac

from .realapp import SERVED_PHP_LOG, AppDatabase, php_error_log_lines, php_string

SOURCE = "/usr/share/wordpress"  # Debian's package: the docroot's tree, the seeding's ABSPATH

SALT_NAMES = ("AUTH_KEY", "SECURE_AUTH_KEY", "LOGGED_IN_KEY", "NONCE_KEY", "AUTH_SALT",
              "SECURE_AUTH_SALT", "LOGGED_IN_SALT", "NONCE_SALT")
COOKIEHASH = "stacklab"          # the cookies' names do not follow the site URL's port
USER = "stacklab"                # the administrator the installer makes
PASSWORD_HASH = hashlib.md5(b"stacklab-wordpress").hexdigest()
EXPIRATION = 4_102_444_800       # 2100-01-01: the cookie and its session never expire here
TOKEN = hashlib.sha256(b"stacklab-wordpress-session").hexdigest()[:43]
SESSION_VERIFIER = hashlib.sha256(TOKEN.encode()).hexdigest()   # what WordPress stores


def salt(name: str) -> str:
    """Each key or salt distinct (WordPress replaces duplicates with random ones)."""
    return hashlib.sha256(f"stacklab-wordpress:{name}".encode()).hexdigest()


def _cookie(scheme: str) -> str:
    """wp_generate_auth_cookie(): HMAC-SHA256 under a key that is wp_hash() (HMAC-MD5
    under the scheme's key and salt) of the user, a fragment of the password hash, the
    expiry and the session token."""
    prefix = {"auth": "AUTH", "logged_in": "LOGGED_IN"}[scheme]
    secret = salt(f"{prefix}_KEY") + salt(f"{prefix}_SALT")
    frag = PASSWORD_HASH[8:12]
    key = hmac.new(secret.encode(), f"{USER}|{frag}|{EXPIRATION}|{TOKEN}".encode(),
                   "md5").hexdigest()
    mac = hmac.new(key.encode(), f"{USER}|{EXPIRATION}|{TOKEN}".encode(),
                   "sha256").hexdigest()
    return f"{USER}|{EXPIRATION}|{TOKEN}|{mac}"


def login_cookie() -> str:
    """The Cookie header of the logged-in administrator: the admin cookie (wp-admin over
    plain HTTP checks the 'auth' scheme) and the logged-in one (the toolbar, the front)."""
    return (f"wordpress_{COOKIEHASH}={_cookie('auth')}; "
            f"wordpress_logged_in_{COOKIEHASH}={_cookie('logged_in')}")


CONFIG = """<?php
// stacklab's WordPress configuration (Debian's wp-config.php reads /etc/wordpress).
// PHP's errors go where stacklab reads them (beside the docroot, for the site).
{log}define('DB_NAME', {db_name});
define('DB_USER', {db_user});
define('DB_PASSWORD', {db_password});
define('DB_HOST', 'localhost');    // php.ini's mysqli.default_socket
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');
{salts}
$table_prefix = 'wp_';
// The site answers on whichever host:port it was asked (the port changes per run).
$stacklab_host = preg_replace('/[^A-Za-z0-9.:\\[\\]-]/', '', $_SERVER['HTTP_HOST'] ?? 'localhost');
define('WP_HOME', 'http://' . $stacklab_host);
define('WP_SITEURL', 'http://' . $stacklab_host);
define('WP_CONTENT_DIR', {abspath} . 'wp-content');
define('WP_CONTENT_URL', WP_HOME . '/wp-content');
define('COOKIEHASH', {cookiehash});
define('DISABLE_WP_CRON', true);            // no cron run inside a measured request
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_AUTO_UPDATE_CORE', false);
define('WP_HTTP_BLOCK_EXTERNAL', true);     // no update or news check leaves the machine
define('WP_DEBUG', false);
if (!defined('ABSPATH')) {{
    define('ABSPATH', {abspath});
}}
{tail}"""


def config(db: AppDatabase, abspath_php: str, log_php: str, tail: str) -> str:
    """wp-config.php: for the site (ABSPATH its docroot, then wp-settings.php) or for the
    seeding (the package's directory, no wp-settings.php: the seeder loads it after
    WP_INSTALLING); 'localhost' is the running server's socket or the seeding one's."""
    salts = "\n".join(f"define('{n}', {php_string(salt(n))});" for n in SALT_NAMES)
    return CONFIG.format(log=php_error_log_lines(log_php), db_name=php_string(db.name),
                         db_user=php_string(db.user), db_password=php_string(db.password),
                         salts=salts, abspath=abspath_php, cookiehash=php_string(COOKIEHASH),
                         tail=tail)


def site_config(db: AppDatabase) -> bytes:
    """The served site's wp-config.php (in the docroot)."""
    return config(db, "__DIR__ . '/'", SERVED_PHP_LOG,
                  "require_once ABSPATH . 'wp-settings.php';\n").encode()
