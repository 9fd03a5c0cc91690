from .adapter import External

__all__ = ["External"]
