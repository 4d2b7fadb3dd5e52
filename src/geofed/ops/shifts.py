"""Sustained level shifts in a monitoring series (seed 001: a range extender's licence
capped the buffers, and the link's bandwidth sat at a lower level from one day on).

At every sample i the median of the `run` samples after it is compared with the
median of the `run` samples before it. Medians ignore short spikes (fewer than
run/2 samples), so only a change that lasts is seen. A change counts when it is
larger than `k` robust standard deviations of the series' noise (from the MAD of
successive differences, which a step barely moves) and larger than `rel` of the
level before it, so a statistically clear but tiny drift on a quiet link is not an
event. Each run of neighbouring candidates gives one event, at the split where both sides are most uniform.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

MAD_TO_SIGMA = 1.4826  # for normally distributed noise


def noise_sigma(x: np.ndarray) -> float:
    d = np.diff(x)
    return float(MAD_TO_SIGMA * np.median(np.abs(d - np.median(d))) / np.sqrt(2)) if len(d) else 0.0


def level_shifts(t: list[float], x: list[float], run: int = 8, k: float = 5.0, rel: float = 0.10) -> list[dict]:
    """Events {start, index, before, after, change, relative} in series x at times t."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    if n < 2 * run:
        return []
    med = np.median(sliding_window_view(x, run), axis=1)  # med[j] = median of x[j:j+run]
    idx = np.arange(run, n - run + 1)  # a shift starting at sample i: before x[i-run:i], after x[i:i+run]
    before, after = med[idx - run], med[idx]
    change = after - before
    threshold = np.maximum(k * noise_sigma(x), rel * np.abs(before))
    hits = np.abs(change) > threshold
    events = []
    i = 0
    while i < len(idx):
        if not hits[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(idx) and hits[j + 1] and np.sign(change[j + 1]) == np.sign(change[i]):
            j += 1
        # Within the candidates the step itself is where the two windows are each
        # most uniform (least absolute deviation from their own medians).
        cost = [np.abs(x[a - run:a] - before[c]).sum() + np.abs(x[a:a + run] - after[c]).sum()
                for c, a in zip(range(i, j + 1), idx[i:j + 1])]
        best = i + int(np.argmin(cost))
        at = int(idx[best])
        events.append({"start": t[at], "index": at, "before": float(before[best]), "after": float(after[best]),
                       "change": float(change[best]),
                       "relative": float(change[best] / before[best]) if before[best] else None})
        i = j + 1
    return events
