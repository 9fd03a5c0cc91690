"""nginx as a reverse proxy, cache and balancer in front of a stack."""

from .adapter import NginxProxy

__all__ = ["NginxProxy"]
