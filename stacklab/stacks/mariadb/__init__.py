"""MariaDB: the model application's database (S1's MySQL), seeded once per experiment."""

from .adapter import MariaDB

__all__ = ["MariaDB"]
