from .adapter import ApacheProxy

__all__ = ["ApacheProxy"]
