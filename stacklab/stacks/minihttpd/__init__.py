from .adapter import MiniHttpd

__all__ = ["MiniHttpd"]
