"""What a lab path may not hold, for every use the lab makes of it.

A mount's options and /proc/mounts (',' separates options, '\\' escapes), server configs
(where ';', '#', quotes, '$' and globs mean something, '(' opens mod_ssl's cache size)
and PHP_INI_SCAN_DIR (a ':'-separated list); with whitespace and control characters.
One list, here below both of its users: the lab root is checked against it up front
(lab.check_root) and the filesystem layer refuses the same characters when it mounts
(netlab.fscheck), so a root accepted here is never refused when the session closes.
"""

from __future__ import annotations

UNSAFE = frozenset(';{}"\'#\\$|:()*?[],')


def unsafe_char(text: str) -> str | None:
    """The first character of `text` that a lab path may not hold, or None."""
    return next((c for c in text if c in UNSAFE or c.isspace() or not c.isprintable()), None)
