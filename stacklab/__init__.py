"""stacklab: a performance lab for web stacks."""

__version__ = "0.1.0"
