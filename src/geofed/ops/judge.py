"""Judgement of a monitored path: ok, degraded or down, with the reason.

Each series (a path, a direction, a metric) is judged on its current level (the
newest probe period's median delay and loss, the median of a test's newest `window`
samples), against
- the link model (federation.py's physics: the one-way delay of the fibre and the
  fabrics, the bandwidth cap; an MPI ping-pong of S bytes takes one-way + S/bandwidth),
  worse by more than `model_tolerance` of it;
- the path's own reference, learnt from its first `reference_samples` good samples
  and kept in the store: worse by more than `reference_sigmas` of its noise and
  `reference_tolerance` of its level, widened by the samples' clock error bound;
- thresholds the schedule sets per metric (a ceiling for delays and loss, a floor
  for bandwidths; loss has `loss_degraded` unless one is set);
and a test that failed, or a probe that got nothing through, is down. A path is as
bad as its worst series. Sustained level shifts (ops/shifts.py) are named beside it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from geofed.errors import UserError
from geofed.ops.monitor_store import Store
from geofed.ops.shifts import level_shifts, noise_sigma

# metric -> (unit shown, higher is worse)
METRICS = {"owd_ms": ("ms", True), "loss": ("", True), "latency_us": ("us", True),
           "bw_MBps": ("MB/s", False), "throughput_Mbps": ("Mbit/s", False)}
PROBE_METRICS = ("owd_ms", "loss")
STATES = ("ok", "degraded", "down")
SHIFT_SAMPLES = 200  # the newest samples the level-shift detector looks at


@dataclass(frozen=True)
class Settings:
    window: int = 3  # a test's samples (MPI, throughput) whose median is its current level
    model_tolerance: float = 0.5
    reference_samples: int = 10
    reference_tolerance: float = 0.1
    reference_sigmas: float = 5.0
    loss_degraded: float = 0.01  # the loss threshold unless [judge.thresholds] sets one
    thresholds: dict = field(default_factory=dict)  # metric -> bound
    bw_bytes: int = 1 << 20  # the MPI bandwidth message (its model depends on it)
    stale_s: float = 60.0  # a path with no probe sample for this long is down (is the service running?)

    def __post_init__(self):
        unknown = set(self.thresholds) - set(METRICS)
        if unknown:
            raise UserError(f"[judge.thresholds]: unknown metric {sorted(unknown)[0]!r} "
                            f"(known: {', '.join(METRICS)})")


def model(fed, metric: str, src: str, dst: str, bw_bytes: int) -> float | None:
    """What the link model says a metric of the path src -> dst should be."""
    a, b = fed.node(src).site, fed.node(dst).site
    one_way_s = fed.one_way_ms(a, b) / 1e3
    gbps = fed.bandwidth_gbps(a, b)
    if metric == "owd_ms":
        return one_way_s * 1e3
    if metric == "latency_us":
        return one_way_s * 1e6
    if gbps is None:
        return None
    if metric == "bw_MBps":
        return bw_bytes / (one_way_s + bw_bytes * 8 / (gbps * 1e9)) / 1e6
    if metric == "throughput_Mbps":
        return gbps * 1e3
    return None


def _fmt(metric: str, v: float) -> str:
    return f"{v * 100:.2f} %" if metric == "loss" else f"{v:.4g} {METRICS[metric][0]}"


def worse_by(metric: str, level: float, than: float) -> float:
    """How much worse `level` is than `than` (negative: better), in the metric's unit."""
    return level - than if METRICS[metric][1] else than - level


def assess_series(store: Store, st: Settings, fed, path: str, src: str, dst: str, metric: str) -> tuple[str, str]:
    """(state, reason) of one series."""
    name = f"{metric} {src}>{dst}"
    # a probe's sample is already the median of a period's datagrams
    recent = store.latest(path, src, dst, metric, 1 if metric in PROBE_METRICS else st.window)
    if not recent:
        return "ok", ""
    if recent[-1].error:
        return "down", f"{name}: {recent[-1].error}"
    values = [s.value for s in recent if s.value is not None]
    level = statistics.median(values)
    bound = max((s.bound or 0.0) for s in recent)
    reasons = []
    limit = st.thresholds.get(metric, st.loss_degraded if metric == "loss" else None)
    if limit is not None and worse_by(metric, level, limit) > bound:
        reasons.append(f"{name} {_fmt(metric, level)} beyond threshold {_fmt(metric, limit)}")
    expected = model(fed, metric, src, dst, st.bw_bytes)
    if expected and worse_by(metric, level, expected) > st.model_tolerance * expected + bound:
        reasons.append(f"{name} {_fmt(metric, level)} vs model {_fmt(metric, expected)} "
                       f"({(level / expected - 1) * 100:+.0f} %)")
    ref = reference(store, st, path, src, dst, metric)
    if ref and metric != "loss":
        ref_level, spread = ref
        allowed = max(st.reference_sigmas * spread, st.reference_tolerance * abs(ref_level)) + bound
        if worse_by(metric, level, ref_level) > allowed:
            reasons.append(f"{name} {_fmt(metric, level)} vs reference {_fmt(metric, ref_level)} "
                           f"({(level / ref_level - 1) * 100:+.0f} %)")
    return ("degraded" if reasons else "ok"), "; ".join(reasons)


def reference(store: Store, st: Settings, path: str, src: str, dst: str, metric: str) -> tuple[float, float] | None:
    """The series' reference (level, noise): the stored one, else what its first good
    samples give once there are `reference_samples` of them (`learn` stores it)."""
    ref = store.reference(path, src, dst, metric)
    if ref is not None:
        return ref
    first = [r[0] for r in store.rows("SELECT value FROM samples WHERE path=? AND src=? AND dst=? AND metric=? "
                                      "AND value IS NOT NULL AND during IS NULL ORDER BY t, id LIMIT ?",
                                      (path, src, dst, metric, st.reference_samples))]
    if len(first) < st.reference_samples:
        return None
    return statistics.median(first), noise_sigma(np.asarray(first))


def learn(store: Store, st: Settings, path: str) -> None:
    """Keep the reference of every series of the path that has enough samples for one
    (the service does; `monitor status` only reads)."""
    for p, src, dst, metric in store.series_keys():
        if p == path and store.reference(p, src, dst, metric) is None:
            ref = reference(store, st, p, src, dst, metric)
            if ref is not None:
                store.set_reference(p, src, dst, metric, *ref, st.reference_samples)


def newest_shift(store: Store, path: str, src: str, dst: str, metric: str) -> str | None:
    rows = store.latest(path, src, dst, metric, SHIFT_SAMPLES)
    good = [s for s in rows if s.value is not None]
    events = level_shifts([s.t for s in good], [s.value for s in good])
    if not events:
        return None
    e = events[-1]
    return (f"{metric} {src}>{dst} shifted {_fmt(metric, e['before'])} -> {_fmt(metric, e['after'])} "
            f"at {time.strftime('%H:%M:%S', time.localtime(e['start']))}")


def assess_path(store: Store, st: Settings, fed, path: str) -> tuple[str, str]:
    """(state, reason) of a path: its worst series; the reasons of every series not ok."""
    worst, reasons = "ok", []
    for p, src, dst, metric in store.series_keys():
        if p != path:
            continue
        state, reason = assess_series(store, st, fed, path, src, dst, metric)
        if state != "ok":
            reasons.append(reason)
            worst = max(worst, state, key=STATES.index)
    return worst, "; ".join(reasons)


def stale(store: Store, st: Settings, path: str, now: float) -> str | None:
    """Why a path's probe samples stopped coming, if they did."""
    (last,) = store.rows("SELECT MAX(t) FROM samples WHERE path=? AND metric='owd_ms'", (path,))[0]
    if last is not None and now - last > st.stale_s:
        return f"no probe sample for {now - last:.0f} s (is `geofed monitor serve` running?)"
    return None


def status(store: Store, fed, st: Settings, now: float) -> list[tuple[str, str, str]]:
    """(path, state, reason) of every path in the store; the newest shifts beside them."""
    out = []
    for path in sorted({k[0] for k in store.series_keys()}):
        why_stale = stale(store, st, path, now)
        state, reason = ("down", why_stale) if why_stale else assess_path(store, st, fed, path)
        shifts = [s for p, src, dst, m in store.series_keys() if p == path
                  for s in [newest_shift(store, path, src, dst, m)] if s]
        out.append((path, state, "; ".join(x for x in [reason, *shifts] if x)))
    return out


def status_lines(store_path: str) -> tuple[list[str], bool]:
    """`geofed monitor status`: a line per path, and whether any is not ok."""
    from geofed import federation
    store = Store(store_path, create=False)
    try:
        fed_path, settings = store.meta("federation"), store.meta("judge")
        if fed_path is None or settings is None:
            raise UserError(f"{store_path}: not a store of `geofed monitor serve` (no schedule recorded)")
        rows = status(store, federation.load(fed_path), Settings(**settings), time.time())
    finally:
        store.close()
    if not rows:
        raise UserError(f"{store_path}: the store has no samples yet")
    width = max(len(p) for p, _, _ in rows)
    return [f"{p:<{width}}  {state:<8}  {reason}".rstrip() for p, state, reason in rows], \
        any(state != "ok" for _, state, _ in rows)
