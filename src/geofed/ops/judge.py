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
and a probe period that got nothing through, or `down_after` failed tests in a row,
is down. An MPI latency is judged on the network's share of its excess: what the
probe's delay on the same path rose by meanwhile (`host_share_us`). A path is as
bad as its worst series. Sustained level shifts (ops/shifts.py) are named beside it.

Loss is judged per path on counts, not on a period's rate: at 0.1 % a period of a few
thousand datagrams loses a handful or none, so the datagrams lost in both directions
over the newest `loss_periods` periods are held against what the path's reference
loss rate (at least `loss_floor`) makes likely; fewer than `loss_alpha` of quiet
windows would lose that many (Poisson), so an isolated lost datagram alerts nobody
and a sustained 0.1 % does (docs/monitor.md, "Detection limits"). Random loss falls
in every period and both ways; a burst (the host stalled the link for a moment) in
one period of one direction, below the threshold, is not a loss rate: the lost
datagrams must fall in `loss_spread` samples of the window.
"""

from __future__ import annotations

import math
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
    down_after: int = 2  # a test's failures in a row that make its path down
    model_tolerance: float = 0.5
    reference_samples: int = 10
    reference_tolerance: float = 0.1
    reference_sigmas: float = 5.0
    loss_degraded: float = 0.01  # the loss threshold unless [judge.thresholds] sets one
    loss_periods: int = 2  # the probe periods whose lost datagrams are judged together
    loss_alpha: float = 1e-5  # how unlikely a window's loss must be on the reference to be degraded
    loss_floor: float = 1e-6  # the reference loss rate assumed at least (a path that lost nothing yet)
    loss_spread: int = 2  # samples of the window (a period, a direction) that lost some: one burst is a stall
    thresholds: dict = field(default_factory=dict)  # metric -> bound
    tolerances: dict = field(default_factory=dict)  # metric -> its own reference_tolerance
    probe_datagrams: float = 100.0  # datagrams a probe sends per period and direction (the schedule's)
    bw_bytes: int = 1 << 20  # the MPI bandwidth message (its model depends on it)
    stale_s: float = 60.0  # a path with no probe sample for this long is down (is the service running?)

    def __post_init__(self):
        for table in ("thresholds", "tolerances"):
            unknown = set(getattr(self, table)) - set(METRICS)
            if unknown:
                raise UserError(f"[judge.{table}]: unknown metric {sorted(unknown)[0]!r} "
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


def poisson_tail(k: int, mean: float) -> float:
    """P(X >= k) for X ~ Poisson(mean > 0); 1 when k is not above the mean (never significant)."""
    if k <= mean:
        return 1.0
    term = math.exp(-mean + k * math.log(mean) - math.lgamma(k + 1))
    tail, i = 0.0, k
    while term > tail * 1e-12:  # terms fall at least geometrically beyond the mean
        tail += term
        i += 1
        term *= mean / i
    return tail


def assess_loss(store: Store, st: Settings, path: str) -> tuple[str, str]:
    """(state, reason) of a path's loss: both directions' datagrams over the newest
    `loss_periods` periods, against the reference rate and the threshold."""
    lost = sent = lossy = 0
    expected = 0.0
    for p, src, dst, metric in store.series_keys():
        if p != path or metric != "loss":
            continue
        ref = reference(store, st, path, src, dst, metric)
        rate = max(ref[0] if ref else 0.0, st.loss_floor)
        for s in store.latest(path, src, dst, metric, st.loss_periods):
            lost += round(s.value * st.probe_datagrams)
            sent += round(st.probe_datagrams)
            lossy += s.value > 0
            expected += rate * st.probe_datagrams
    if not sent:
        return "ok", ""
    name, share = f"loss {path}", lost / sent
    limit = st.thresholds.get("loss", st.loss_degraded)
    if share > limit:
        return "degraded", f"{name} {_fmt('loss', share)} beyond threshold {_fmt('loss', limit)}"
    p = poisson_tail(lost, expected)
    if p < st.loss_alpha and lossy >= st.loss_spread:
        return "degraded", (f"{name} {lost} of {sent} datagrams ({share * 100:.3f} %) in the newest "
                            f"{st.loss_periods} periods, p = {p:.0e} at its reference {expected / sent * 100:.4f} %")
    return "ok", ""


def assess_series(store: Store, st: Settings, fed, path: str, src: str, dst: str, metric: str) -> tuple[str, str]:
    """(state, reason) of one series (of loss: the path's, both directions together)."""
    if metric == "loss":
        return assess_loss(store, st, path)
    name = f"{metric} {src}>{dst}"
    # a probe's sample is already the median of a period's datagrams
    recent = store.latest(path, src, dst, metric, 1 if metric in PROBE_METRICS else st.window)
    # A probe period with nothing through is thousands of datagrams lost: down at once.
    # One test that timed out may be the host's hiccup: down when `down_after` in a row did.
    in_a_row = 1 if metric in PROBE_METRICS else st.down_after
    failed = store.latest(path, src, dst, metric, in_a_row)
    if len(failed) == in_a_row and all(s.error for s in failed):
        return "down", f"{name}: {failed[-1].error}" + (f" ({in_a_row} tests in a row)" if in_a_row > 1 else "")
    values = [s.value for s in recent if s.value is not None]
    if not values:
        return "ok", ""
    level = statistics.median(values)
    bound = max((s.bound or 0.0) for s in recent if s.value is not None)
    ref = reference(store, st, path, src, dst, metric)
    if metric == "latency_us" and ref:
        level -= host_share_us(store, st, path, level - ref[0], since=recent[0].t)
    reasons = []
    limit = st.thresholds.get(metric)
    if limit is not None and worse_by(metric, level, limit) > bound:
        reasons.append(f"{name} {_fmt(metric, level)} beyond threshold {_fmt(metric, limit)}")
    expected = model(fed, metric, src, dst, st.bw_bytes)
    if expected and worse_by(metric, level, expected) > st.model_tolerance * expected + bound:
        reasons.append(f"{name} {_fmt(metric, level)} vs model {_fmt(metric, expected)} "
                       f"({(level / expected - 1) * 100:+.0f} %)")
    if ref:
        ref_level, spread = ref
        allowed = reference_slack(st, metric, ref_level, spread) + bound
        if worse_by(metric, level, ref_level) > allowed:
            reasons.append(f"{name} {_fmt(metric, level)} vs reference {_fmt(metric, ref_level)} "
                           f"({(level / ref_level - 1) * 100:+.0f} %)")
    return ("degraded" if reasons else "ok"), "; ".join(reasons)


def host_share_us(store: Store, st: Settings, path: str, excess_us: float, since: float) -> float:
    """The part of an MPI latency's excess over its reference that the hosts, not the
    link, added: the excess beyond what the probe's one-way delay on the same path rose
    by over the same time (both directions' medians since `since`, against their
    references). A loaded host delays MPI's ranks by tens of per cent while the probe's
    delay holds within microseconds; a longer fibre moves both alike. Nothing is taken
    off where the path has no probe to tell."""
    rises = []
    for p, src, dst, metric in store.series_keys():
        if p != path or metric != "owd_ms":
            continue
        ref = reference(store, st, path, src, dst, metric)
        values = [r[0] for r in store.rows(
            "SELECT value FROM samples WHERE path=? AND src=? AND dst=? AND metric='owd_ms' "
            "AND value IS NOT NULL AND during IS NULL AND t >= ?", (path, src, dst, since))]
        if ref and values:
            rises.append((statistics.median(values) - ref[0]) * 1e3)
    if not rises or excess_us <= 0:
        return 0.0
    return max(0.0, excess_us - max(0.0, statistics.mean(rises)))


def reference_slack(st: Settings, metric: str, level: float, spread: float) -> float:
    """How far a series may be off its reference level (before the clock's bound)."""
    return max(st.reference_sigmas * spread, st.tolerances.get(metric, st.reference_tolerance) * abs(level))


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
        if state != "ok" and reason not in reasons:  # loss: one reason for both directions
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


def open_store(store_path: str) -> tuple[Store, object, Settings]:
    """A store of `monitor serve` to read, with the federation and the judgement settings it recorded."""
    from geofed import federation
    store = Store(store_path, create=False)
    fed_path, settings = store.meta("federation"), store.meta("judge")
    if fed_path is None or settings is None:
        store.close()
        raise UserError(f"{store_path}: not a store of `geofed monitor serve` (no schedule recorded)")
    try:
        return store, federation.load(fed_path), Settings(**settings)
    except BaseException:
        store.close()
        raise


def status_lines(store_path: str) -> tuple[list[str], bool]:
    """`geofed monitor status`: a line per path, and whether any is not ok."""
    store, fed, st = open_store(store_path)
    try:
        rows = status(store, fed, st, time.time())
    finally:
        store.close()
    if not rows:
        raise UserError(f"{store_path}: the store has no samples yet")
    width = max(len(p) for p, _, _ in rows)
    return [f"{p:<{width}}  {state:<8}  {reason}".rstrip() for p, state, reason in rows], \
        any(state != "ok" for _, state, _ in rows)
