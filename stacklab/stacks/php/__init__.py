"""PHP itself: php.ini and the extension set, shared by php-fpm, mod_php and php-cgi.

Not a process: a knob group (`php.*`) that every PHP handler renders the same way, so
`php.opcache = [true, false]` means the same thing under every handler.
"""

from .ini import render_php_config, php_env
from .knobs import KNOBS, php_inert
from .verify import verify_php

__all__ = ["KNOBS", "php_inert", "render_php_config", "php_env", "verify_php"]
