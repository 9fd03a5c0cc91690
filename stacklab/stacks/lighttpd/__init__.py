from .adapter import Lighttpd

__all__ = ["Lighttpd"]
