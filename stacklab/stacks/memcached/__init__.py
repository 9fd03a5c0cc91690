"""memcached: an in-memory session store for PHP (S3)."""

from .adapter import Memcached

__all__ = ["Memcached"]
