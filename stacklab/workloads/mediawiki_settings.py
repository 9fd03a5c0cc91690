"""MediaWiki's LocalSettings.php as stacklab writes it: one text for the served wiki and
for the seeding scripts, which differ only in where the caches and PHP's errors go.

What it settles, and why:
- the database: 'localhost' through mysqli's default socket, which stacklab's php.ini
  names (the running mariadb's, or the seeding server's on the command line);
- $wgServer follows the request's Host (MediaWiki's own detection): the port changes
  per run and a front cache may sit on another;
- the object caches are the PHP knobs': with APCu loaded and enabled (php.apcu) the main
  cache is CACHE_ACCEL, and the parser and message caches (CACHE_ANYTHING, MediaWiki's
  default, spelled out) follow it into APCu; without APCu the main cache is CACHE_NONE
  (what MediaWiki's own installer picks without an accelerator: CACHE_DB would turn
  every page view's cache reads into extra statements) and CACHE_ANYTHING falls back to
  the database's objectcache table, so a parsed article is still reused, read from
  MariaDB. Either way an article is parsed on its first view and served from the
  parser cache after: the load measures the cached view;
- the localisation cache is files in $wgCacheDirectory (the docroot's `cache`, which
  deployment empties and the server's user writes): built on the first request, which
  verification makes before any load;
- $wgJobRunRate = 0: page views run no queued jobs (which would write to the database
  at random during the load); no uploads, no e-mail, no pingback;
- PHP's errors go to the log beside the docroot that verification reads.
"""

from __future__ import annotations

import hashlib

SITENAME = "Stacklab Wiki"

# PHP expressions, evaluated in LocalSettings.php (__DIR__ is the docroot).
SERVED_CACHE = "__DIR__ . '/cache'"
SERVED_LOG = "dirname( __DIR__ ) . '/' . basename( __DIR__ ) . '.php.log'"


def secrets(seed: int) -> tuple[str, str]:
    """$wgSecretKey (64 hex) and $wgUpgradeKey (16 hex), fixed by the seed."""
    key = hashlib.sha256(f"stacklab-mediawiki-{seed}".encode()).hexdigest()
    return key, hashlib.sha256(key.encode()).hexdigest()[:16]


def local_settings(seed: int, cache_dir: str = SERVED_CACHE, error_log: str = SERVED_LOG,
                   name: str = "stacklab_app", user: str = "stacklab",
                   password: str = "stacklab") -> str:
    """LocalSettings.php. cache_dir: a PHP expression (or a path, quoted here when it is
    one); error_log: a PHP expression, or "" to leave PHP's logging alone (the CLI)."""
    secret, upgrade = secrets(seed)
    cache = cache_dir if "__DIR__" in cache_dir else repr(cache_dir)
    log = (f"ini_set( 'log_errors', '1' );\nini_set( 'error_log', {error_log} );\n"
           if error_log else "")
    return f"""<?php
# Written by stacklab (stacklab/workloads/mediawiki_settings.py): see its docstring.
if ( !defined( 'MEDIAWIKI' ) ) {{
	exit;
}}
{log}
$wgSitename = '{SITENAME}';
$wgMetaNamespace = 'Project';
$wgScriptPath = '';
$wgResourceBasePath = $wgScriptPath;
$wgServer = WebRequest::detectServer();
$wgLanguageCode = 'en';
$wgLocaltimezone = 'UTC';

$wgDBtype = 'mysql';
$wgDBserver = 'localhost';
$wgDBname = '{name}';
$wgDBuser = '{user}';
$wgDBpassword = '{password}';
$wgDBprefix = '';
$wgDBTableOptions = 'ENGINE=InnoDB, DEFAULT CHARSET=binary';

$stacklabApcu = function_exists( 'apcu_enabled' ) && apcu_enabled();
$wgMainCacheType = $stacklabApcu ? CACHE_ACCEL : CACHE_NONE;
$wgParserCacheType = CACHE_ANYTHING;
$wgMessageCacheType = CACHE_ANYTHING;
$wgSessionCacheType = CACHE_ANYTHING;
$wgCacheDirectory = {cache};
$wgLocalisationCacheConf['store'] = 'files';

$wgSecretKey = '{secret}';
$wgUpgradeKey = '{upgrade}';
$wgAuthenticationTokenVersion = '1';

$wgJobRunRate = 0;
$wgEnableUploads = false;
$wgUseInstantCommons = false;
$wgEnableEmail = false;
$wgEnableUserEmail = false;
$wgPingback = false;
$wgDiff3 = '';
$wgRightsPage = '';
$wgRightsUrl = '';
$wgRightsText = '';

wfLoadSkin( 'Vector' );
$wgDefaultSkin = 'vector';
"""
