from .adapter import Apache

__all__ = ["Apache"]
