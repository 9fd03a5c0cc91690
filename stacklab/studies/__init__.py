"""The five source studies re-measured: their findings as data (findings), the experiments
that answer them (plans), then-against-now verdicts (verdict) and the study report."""
