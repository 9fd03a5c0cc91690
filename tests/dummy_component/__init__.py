"""A component that exists only for tests/test_new_component.py: proof that a new server is
one directory (this one: adapter, knobs, template) plus one registry line."""

from .adapter import PyHttp

__all__ = ["PyHttp"]
