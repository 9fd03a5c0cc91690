"""A balancer's `weights` knob ("1,2,1"): one whole number per backend, each within the
balancer's own range. Parsed, and counted against the backends, one way for every front
layer that balances (haproxy, nginx-proxy, apache-proxy); each says its own range."""

from __future__ import annotations

from ..errors import StackError


def parse_weights(text: str, most: int) -> list[int] | None:
    """The weights of a non-empty value, or None when one is not a whole number 1..most."""
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isascii() and p.isdigit() and 1 <= int(p) <= most for p in parts):
        return None
    return [int(p) for p in parts]


def weights_for(component: str, text: str, backends: int, most: int) -> list[int]:
    """Each backend's weight (empty: all 1); a StackError naming the knob when the value
    is not valid or its count differs from the backends' (which the knob cannot know)."""
    if not text:
        return [1] * backends
    weights = parse_weights(text, most)
    if weights is None:
        raise StackError(f"{component}.weights = {text!r}: whole numbers 1..{most} "
                         "separated by commas, one per backend")
    if len(weights) != backends:
        raise StackError(f"{component}.weights = {text!r} gives {len(weights)} weights for "
                         f"{backends} backends")
    return weights
