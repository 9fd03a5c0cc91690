"""HAProxy: a balancer in front of a stack's replicas."""

from .adapter import HAProxy

__all__ = ["HAProxy"]
