"""Squid: a caching reverse proxy in front of a stack (layer "cache")."""

from .adapter import Squid

__all__ = ["Squid"]
