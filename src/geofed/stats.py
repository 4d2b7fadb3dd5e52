"""Summary statistics of timing samples, as OSU and IMB users read them."""

from __future__ import annotations

import math
import statistics


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile, q in 0..100: always one of the samples."""
    if not samples:
        raise ValueError("percentile of no samples")
    s = sorted(samples)
    k = max(0, min(len(s) - 1, math.ceil(q * len(s) / 100) - 1))
    return s[k]


def summary(samples: list[float]) -> dict:
    return {
        "n": len(samples),
        "min": min(samples),
        "p50": statistics.median(samples),
        "p90": percentile(samples, 90),
        "p99": percentile(samples, 99),
        "mean": statistics.fmean(samples),
        "std": statistics.pstdev(samples) if len(samples) > 1 else 0.0,
    }
