from .adapter import Nginx

__all__ = ["Nginx"]
