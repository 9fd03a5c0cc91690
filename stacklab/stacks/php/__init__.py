"""PHP itself: php.ini and the extension set, shared by php-fpm, mod_php and php-cgi.

Not a process: a knob group (`php.*`) that every PHP handler renders the same way, so
`php.opcache = [true, false]` means the same thing under every handler; and the php:*
capabilities (capabilities.py) the components that run PHP provide, each with the probe
and the verifier that check it. The installed version is found once (install.py).
"""

from . import install
from .capabilities import APACHE2HANDLER, CAPABILITIES, CGI, CGI_FCGI, FPM_FCGI
from .ini import php_env, render_php_config
from .knobs import KNOBS
from .verify import verify_php

__all__ = ["APACHE2HANDLER", "CAPABILITIES", "CGI", "CGI_FCGI", "FPM_FCGI", "KNOBS",
           "install", "php_env", "render_php_config", "verify_php"]
