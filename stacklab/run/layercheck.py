"""What the front layers did over a run's measured window, from their own counters, and
the verdicts on it: a verify before the load can show that a cache caches one page, not
that it served the workload from cache, nor that a balancer spread the load.

- A cache's hit ratio is hits / (hits + misses) of its counters (a pass is a miss). A
  workload says which share of its requests a shared cache may store (`cacheable`). The
  outermost cache is judged by it (one behind another sees only the first one's misses):
  hits on a workload that may not be cached are a FAIL (the cache served what the page
  forbade), unless the layer is told to override the backend's headers; no hits at all on
  a cacheable one are a FAIL (it did not cache); a ratio more than 10 points from the
  share is a WARN (a URL set larger than the cache, a TTL shorter than the run: a real
  measurement, but not what the workload alone predicts). A cache whose counters could
  not be read is a WARN: its hit ratio is unknown.
- A balancer's spread is each replica's share of the requests, by the replicas' own
  counters (or, where a replica counts none, by the balancer's per-backend counters).
  A replica below half of what it was promised (its weight's share; 1/N where the method
  promises nothing, as least connections) is a FAIL; where the method promises shares, a
  share more than 10% off them is a FAIL too. Fewer than 20 requests per replica (a cache
  in front served nearly all) are too few to judge: WARN.
"""

from __future__ import annotations

from typing import Any

from ..stacks import COMPONENTS, StackDef
from ..measure.verify import Status, Verdict

STRAY_HITS = 0.01       # a hit ratio this low is no caching (and, where nothing may be
                        # cached, counters' noise: a revalidation counted as a hit)
HIT_FAR = 0.10          # |hit ratio - cacheable share| beyond this is a WARN
SPREAD_TOLERANCE = 0.10
# Requests per replica below which a spread is not judged: a cache in front may serve
# nearly everything, and the replicas then count little more than the status readings.
SPREAD_MIN_PER_REPLICA = 20


def layer_figures(stack: StackDef, counted: dict[str, dict[str, float]],
                  knobs: dict[str, dict[str, Any]]) -> dict[str, dict]:
    """layer -> {hits, misses, hit_ratio} for the layers that cache with these knobs (and
    whose counters were read), and for the balancer directly in front of replicas
    {spread: {replica label: requests}, spread_source}."""
    out: dict[str, dict] = {}
    for layer in stack.layers:
        c = counted.get(layer, {})
        if COMPONENTS[layer].caches(knobs[layer]) and "cache_hits" in c \
                and "cache_misses" in c:
            total = c["cache_hits"] + c["cache_misses"]
            out[layer] = {"hits": c["cache_hits"], "misses": c["cache_misses"],
                          "hit_ratio": round(c["cache_hits"] / total, 4) if total else None}
    if stack.replicas > 1 and stack.layers:
        out.setdefault(stack.layers[-1], {}).update(_spread(stack, counted))
    return out


def _spread(stack: StackDef, counted: dict[str, dict[str, float]]) -> dict[str, Any]:
    front = stack.base[0]
    labels = [f"{front}.{i}" for i in range(1, stack.replicas + 1)]
    key = COMPONENTS[front].requests_counter
    if key and all(key in counted.get(label, {}) for label in labels):
        return {"spread": {label: counted[label][key] for label in labels},
                "spread_source": f"the replicas' own counters ({front} {key})"}
    balancer = counted.get(stack.layers[-1], {})
    if all(f"backend:{i}" in balancer for i in range(stack.replicas)):
        return {"spread": {label: balancer[f"backend:{i}"] for i, label in enumerate(labels)},
                "spread_source": f"{stack.layers[-1]}'s per-backend counters"}
    return {}


def layer_verdicts(stack: StackDef, figures: dict[str, dict], cacheable: float | None,
                   knobs: dict[str, dict[str, Any]]) -> list[Verdict]:
    """The verdicts on what the layers did over the measured window (module docstring)."""
    verdicts = []
    caching = [layer for layer in stack.layers if COMPONENTS[layer].caches(knobs[layer])]
    for layer in caching:
        fig = figures.get(layer, {})
        if "hit_ratio" not in fig:
            verdicts.append(Verdict(layer, "hit ratio", Status.WARN, "its counters could "
                                    "not be read: the hit ratio is unknown"))
        elif fig["hit_ratio"] is not None and cacheable is not None and layer == caching[0]:
            overrides = COMPONENTS[layer].overrides_headers(knobs[layer])
            verdicts.append(_hits(layer, fig, cacheable, overrides))
    if stack.replicas > 1:
        balancer = stack.layers[-1]
        if "spread" in figures.get(balancer, {}):
            shares = COMPONENTS[balancer].shares(knobs[balancer], stack.replicas)
            verdicts.append(_spread_verdict(balancer, figures[balancer], shares))
        else:
            verdicts.append(Verdict(balancer, "spread over replicas", Status.WARN,
                                    "neither the replicas nor the balancer count requests: "
                                    "the spread is unknown"))
    return verdicts


def _hits(layer: str, fig: dict, cacheable: float, overrides: bool) -> Verdict:
    ratio, data = fig["hit_ratio"], {**fig, "cacheable": cacheable}
    seen = (f"{ratio:.1%} hits ({fig['hits']:,.0f} of {fig['hits'] + fig['misses']:,.0f}) "
            f"over the measured window; the workload's cacheable share is {cacheable:.0%}")
    if cacheable == 0 and ratio > STRAY_HITS and not overrides:
        return Verdict(layer, "hit ratio", Status.FAIL, seen + ": the cache served pages "
                       "that forbid it", data)
    if cacheable > 0 and ratio <= STRAY_HITS:
        return Verdict(layer, "hit ratio", Status.FAIL, seen + ": the cache did not cache",
                       data)
    if abs(ratio - cacheable) > HIT_FAR and not (overrides and ratio > cacheable):
        return Verdict(layer, "hit ratio", Status.WARN, seen + " (a URL set larger than the "
                       "cache, or a TTL shorter than the run?)", data)
    return Verdict(layer, "hit ratio", Status.PASS, seen, data)


def _spread_verdict(layer: str, fig: dict, shares: list[float] | None) -> Verdict:
    counts = fig["spread"]
    total = sum(counts.values())
    n = len(counts)
    data = {"spread": counts, "source": fig["spread_source"], "expected": shares}
    if total < SPREAD_MIN_PER_REPLICA * n:
        return Verdict(layer, "spread over replicas", Status.WARN,
                       f"only {total:,.0f} requests reached the {n} replicas (a cache in "
                       f"front served the rest?): too few to judge the spread", data)
    got = {label: c / total for label, c in counts.items()}
    seen = ", ".join(f"{label} {share:.0%}" for label, share in got.items())
    seen = f"{seen} of {total:,.0f} requests, by {fig['spread_source']}"
    promised = shares or [1 / n] * n
    starved = [label for (label, share), want in zip(got.items(), promised)
               if share < want / 2]
    if starved:
        return Verdict(layer, "spread over replicas", Status.FAIL,
                       f"{seen}: {', '.join(starved)} got less than half of "
                       f"{'the share its weight promises' if shares else 'a fair share'}",
                       data)
    if shares:
        off = [label for (label, share), want in zip(got.items(), shares)
               if abs(share - want) > SPREAD_TOLERANCE * want]
        if off:
            want = ", ".join(f"{w:.0%}" for w in shares)
            return Verdict(layer, "spread over replicas", Status.FAIL,
                           f"{seen}: {', '.join(off)} more than 10% off the promised "
                           f"{want}", data)
    return Verdict(layer, "spread over replicas", Status.PASS, seen, data)
