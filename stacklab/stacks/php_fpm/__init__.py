from .adapter import PhpFpm

__all__ = ["PhpFpm"]
