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

from .realapp import SERVED_PHP_LOG, AppDatabase, php_error_log_lines, php_string

SITENAME = "Stacklab Wiki"

# A PHP expression, evaluated in LocalSettings.php (__DIR__ is the docroot).
SERVED_CACHE = "__DIR__ . '/cache'"


def secrets(seed: int) -> tuple[str, str]:
    """$wgSecretKey (64 hex) and $wgUpgradeKey (16 hex), fixed by the seed."""
    key = hashlib.sha256(f"stacklab-mediawiki-{seed}".encode()).hexdigest()
    return key, hashlib.sha256(key.encode()).hexdigest()[:16]


def local_settings(db: AppDatabase, cache_dir: str = SERVED_CACHE,
                   error_log: str | None = SERVED_PHP_LOG) -> str:
    """LocalSettings.php for the database `db` (its seed makes the secrets). cache_dir
    and error_log: PHP expressions; error_log None leaves PHP's logging alone (the
    seeding's command line)."""
    secret, upgrade = secrets(db.seed)
    log = php_error_log_lines(error_log) if error_log is not None else ""
    return f"""<?php
# Written by stacklab (stacklab/workloads/mediawiki_settings.py): see its docstring.
if ( !defined( 'MEDIAWIKI' ) ) {{
	exit;
}}
{log}
$wgSitename = {php_string(SITENAME)};
$wgMetaNamespace = 'Project';
$wgScriptPath = '';
$wgResourceBasePath = $wgScriptPath;
$wgServer = WebRequest::detectServer();
$wgLanguageCode = 'en';
$wgLocaltimezone = 'UTC';

$wgDBtype = 'mysql';
$wgDBserver = 'localhost';
$wgDBname = {php_string(db.name)};
$wgDBuser = {php_string(db.user)};
$wgDBpassword = {php_string(db.password)};
$wgDBprefix = '';
$wgDBTableOptions = 'ENGINE=InnoDB, DEFAULT CHARSET=binary';

$stacklabApcu = function_exists( 'apcu_enabled' ) && apcu_enabled();
$wgMainCacheType = $stacklabApcu ? CACHE_ACCEL : CACHE_NONE;
$wgParserCacheType = CACHE_ANYTHING;
$wgMessageCacheType = CACHE_ANYTHING;
$wgSessionCacheType = CACHE_ANYTHING;
$wgCacheDirectory = {cache_dir};
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
