"""wordpress as a workload (issue 24): being built."""

from __future__ import annotations

from .realapp import RealApp

APP = RealApp(pages=(), files=lambda seed: [], database=lambda seed: None)
