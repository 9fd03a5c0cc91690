"""Varnish Cache: the HTTP cache in front of a stack (S1's caching reverse proxy)."""

from .adapter import Varnish

__all__ = ["Varnish"]
