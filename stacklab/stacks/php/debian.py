"""Debian's php.ini-production (PHP 8.2, /usr/lib/php/8.2/php.ini-production) as data.

Debian installs that file as the php.ini of every SAPI (fpm, apache2, cgi), so a stack
measured here starts from what a Debian server runs, not from PHP's built-in defaults.
The differences matter: built-in session.gc_probability is 1 (of 100), so file sessions
scan their directory on every hundredth session start; Debian sets 0 and removes old
sessions from cron. Built-in output_buffering is 0 and zend.assertions 1; Debian's are
4096 and -1.

Only the directives the file sets to a value, for PHP itself and the extensions the
lab installs (sessions, mysqli/mysqlnd); knobs override some of them (see ini.py).
"""

PRODUCTION: tuple[tuple[str, str], ...] = (
    # [PHP]
    ("engine", "On"),
    ("short_open_tag", "Off"),
    ("precision", "14"),
    ("output_buffering", "4096"),
    ("zlib.output_compression", "Off"),
    ("implicit_flush", "Off"),
    ("serialize_precision", "-1"),
    ("zend.enable_gc", "On"),
    ("zend.exception_ignore_args", "On"),
    ("zend.exception_string_param_max_len", "0"),
    ("expose_php", "Off"),
    ("max_execution_time", "30"),
    ("max_input_time", "60"),
    ("memory_limit", "128M"),
    ("error_reporting", "E_ALL & ~E_DEPRECATED & ~E_STRICT"),
    ("display_errors", "Off"),
    ("display_startup_errors", "Off"),
    ("log_errors", "On"),
    ("ignore_repeated_errors", "Off"),
    ("ignore_repeated_source", "Off"),
    ("report_memleaks", "On"),
    ("variables_order", '"GPCS"'),
    ("request_order", '"GP"'),
    ("register_argc_argv", "Off"),
    ("auto_globals_jit", "On"),
    ("post_max_size", "8M"),
    ("default_mimetype", '"text/html"'),
    ("default_charset", '"UTF-8"'),
    ("enable_dl", "Off"),
    ("file_uploads", "On"),
    ("upload_max_filesize", "2M"),
    ("max_file_uploads", "20"),
    ("allow_url_fopen", "On"),
    ("allow_url_include", "Off"),
    ("default_socket_timeout", "60"),
    # [mail function]
    ("SMTP", "localhost"),
    ("smtp_port", "25"),
    ("mail.add_x_header", "Off"),
    # [MySQLi], [mysqlnd]
    ("mysqli.max_persistent", "-1"),
    ("mysqli.allow_persistent", "On"),
    ("mysqli.max_links", "-1"),
    ("mysqli.default_port", "3306"),
    ("mysqlnd.collect_statistics", "On"),
    ("mysqlnd.collect_memory_statistics", "Off"),
    # [Session]
    ("session.save_handler", "files"),
    ("session.use_strict_mode", "0"),
    ("session.use_cookies", "1"),
    ("session.use_only_cookies", "1"),
    ("session.name", "PHPSESSID"),
    ("session.auto_start", "0"),
    ("session.cookie_lifetime", "0"),
    ("session.cookie_path", "/"),
    ("session.serialize_handler", "php"),
    ("session.gc_probability", "0"),
    ("session.gc_divisor", "1000"),
    ("session.gc_maxlifetime", "1440"),
    ("session.cache_limiter", "nocache"),
    ("session.cache_expire", "180"),
    ("session.use_trans_sid", "0"),
    ("session.sid_length", "26"),
    ("session.trans_sid_tags", '"a=href,area=href,frame=src,form="'),
    ("session.sid_bits_per_character", "5"),
    # [Assertion]
    ("zend.assertions", "-1"),
)
