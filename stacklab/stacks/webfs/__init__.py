from .adapter import Webfs

__all__ = ["Webfs"]
