"""stacklab's PHP probe: reports how PHP really runs (SAPI, process, OPcache loaded and
enabled, APCu, php.ini values) so that verify can check what the stack claims. Placed in
the docroot of every stack that runs PHP (each php:* capability's probe)."""

PROBE_PATH = "/_stacklab/probe.php"

PROBE = b"""<?php
$op = function_exists('opcache_get_status') ? @opcache_get_status(false) : false;
header('Content-Type: application/json');
header('Cache-Control: no-store');
echo json_encode([
    'sapi' => PHP_SAPI,
    'pid' => getmypid(),
    'uid' => function_exists('posix_geteuid') ? posix_geteuid() : null,
    'version' => PHP_VERSION,
    'opcache_loaded' => extension_loaded('Zend OPcache'),
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
        'opcache.enable' => ini_get('opcache.enable'),
        'session.gc_probability' => ini_get('session.gc_probability'),
        'session.gc_divisor' => ini_get('session.gc_divisor'),
        'session.save_path' => ini_get('session.save_path'),
        'output_buffering' => ini_get('output_buffering'),
        'memory_limit' => ini_get('memory_limit'),
        'zend.assertions' => ini_get('zend.assertions'),
        'variables_order' => ini_get('variables_order'),
        'session.sid_length' => ini_get('session.sid_length'),
    ],
]);
"""
