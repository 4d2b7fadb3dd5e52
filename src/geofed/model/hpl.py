"""HPL (seeds 001 and 002): HPL's own scalability analysis, every message costed on the federation.

HPL's www/scalability.html (shipped in its source) sums, over the N / NB panels with
m = N - k NB rows left, the panel factorisation, the panel broadcast and the
trailing update, which gives T = 2 g3 N^3 / (3 P Q) + b N^2 (3P + Q) / (2 P Q) +
a N ((NB + 1) log P + P) / NB on a uniform network. Here the phases are kept apart
because a federation is not uniform: on a P x Q grid (row-major: rank r in row
r // Q, column r % Q, `--ranks-per-node` ranks per node as `geofed bench hpl` places
them, node after node in the placement's order)
- compute: (2/3 N^3 + 3/2 N^2) flops / (P Q) at the slowest node's HPL rate at this N,
  from one-node runs (calibration `hpl_n`, `hpl_flop_ns`: time per flop);
- panel factorisation, along a process column: NB log2 P exchanges of 2 NB doubles;
- panel broadcast, along a process row: with the increasing ring (modified) one
  message of m NB / P doubles lies on the critical path; with look-ahead (depth >= 1,
  HPL's default here) its time in flight on the link overlaps the update with the
  previous panel, up to that update's length (its serialisation does not: MPI moves
  the bytes only when the ranks call into it);
- row swaps of the update, along a process column: log2 P + P - 1 messages carrying
  3 m NB / Q doubles in all;
- backward substitution (HPL_pdtrsv): per block the solution block one step down its
  process column (P > 1) and the partial update of NB doubles to the next process
  column (Q > 1), across the link when columns or rows cross it.
A message between ranks at two sites costs what network.mpi_message_s says (the
link's extra latency, its rate, a round trip per full TCP send buffer); the link
carries the messages of every process row (or column) that crosses it at once, so
they share its rate (seed 001 slide 20: the link "modelled as shared medium"), while
each keeps its own local path. Over TCP, the connections across the link start cold:
the first large message each way pays slow start's round trips (`_slow_start_s`).
Local messages cost the one-site MPI curve. On the testbed, with no host core left
over, the emulator's CPU for the bytes crossing the link delays the ranks where their
computation needs every core (calibration.crossing_cpu_s). Only per-node constants
are fitted (one-node HPL, one-site MPI) and the testbed host's (`testbed verify`); the
link is the federation file's.
"""

from __future__ import annotations

import math

from geofed.launch.placement import parse as parse_placement
from geofed.model import Model, Prediction, interpolate, prediction
from geofed.model.network import mpi_message_s, route, slow_start_rounds
from geofed.records.hpl import HplParams, flops, parse_grid
from geofed.validate import positive_int

DOUBLE = 8


def kruse_speedup_bound(p: int) -> float:
    """Seed 001 slide 18: the simple model (Kruse 2009) bounding HPL's speed-up by p / ln p."""
    return 1.0 if p < 2 else p / math.log(p)


class Hpl(Model, name="hpl", measured_unit="s", Params=HplParams):
    """High-Performance Linpack (seeds 001, 002): HPL's scalability model on the federation's links

    Predicts the last order of the run's `ns`, the orders before it solved first in the
    same run (HPL.dat's N list: its connections across the link already open)."""

    def add_arguments(self, ap) -> None:
        ap.add_argument("--n", type=positive_int, required=True, help="matrix order N")
        ap.add_argument("--nb", type=positive_int, default=80, help="block size NB (default 80)")
        ap.add_argument("--ranks-per-node", type=positive_int, default=1,
                        help="ranks per node, as `geofed bench hpl` runs them (default 1)")
        ap.add_argument("--grid", help="process grid PxQ (default: as square as the node count allows, P <= Q)")
        ap.add_argument("--depth", type=int, choices=(0, 1, 2), default=1,
                        help="HPL's look-ahead depth, as `geofed bench hpl --depth` (default 1; 1 or 2: a "
                             "panel's broadcast overlaps the previous panel's update)")
        ap.add_argument("--after", type=positive_int, metavar="N",
                        help="the order solved just before this one in the same HPL run (HPL.dat's N list): "
                             "its TCP connections across the link are open, their windows grown to that "
                             "order's messages (default: a run of its own, cold connections)")

    def params(self, args) -> HplParams:
        p, q = parse_grid(args.grid) if args.grid else (0, 0)
        return HplParams((args.after, args.n) if args.after else (args.n,), args.nb, p, q, depth=args.depth,
                         ranks_per_node=args.ranks_per_node)

    def predict(self, fed, cal, placement, nodes, params: HplParams) -> Prediction:
        params = params.on(len(nodes), f"placement {placement}")
        sites = [node.site for node in nodes for _ in range(params.ranks_per_node)]
        ranks = len(sites)
        p, q, nb = params.p, params.q, params.nb
        n = params.ns[-1]
        after = params.ns[-2] if len(params.ns) > 1 else None
        per_flop = max(self._flop_s(cal, s, n) for s in set(sites))
        compute = flops(n) * per_flop / (p * q)

        rows = [sites[r * q:(r + 1) * q] for r in range(p)]
        cols = [sites[c::q] for c in range(q)]
        row_pair, row_flows = _worst(rows)
        col_pair, col_flows = _worst(cols)
        local = link = 0.0
        link_bytes = 0.0
        first: dict[int, tuple] = {}  # step -> (pair, flows, bytes) of its first, largest message
        # a broadcast's time on the fibre, the part of it look-ahead can hide (below)
        in_flight = route(fed, *row_pair, cal).extra_one_way_s if params.depth else 0.0
        previous_update = 0.0
        for k in range(math.ceil(n / nb)):
            m = n - k * nb
            update = 2 * m * m * nb / (p * q) * per_flop  # this step's trailing update (DGEMM) on a rank
            # With look-ahead, panel k is on the fibre while the ranks update with panel
            # k - 1: its time in flight is hidden, up to that update's length. Putting
            # its bytes on the wire is not: without a progress thread MPI moves them
            # only when the ranks call into it (ma-hd's bandwidth-bound broadcasts
            # showed no overlap, icm-task's latency-bound ones did).
            broadcast_hidden = min(previous_update, in_flight)
            steps = _panel_steps(m, nb, p, q, (row_pair, row_flows), (col_pair, col_flows), broadcast_hidden)
            previous_update = update
            for i, ((a, b), flows, count, nbytes, hidden) in enumerate(steps):
                first.setdefault(i, ((a, b), flows, nbytes))
                t = max(0.0, count * mpi_message_s(fed, cal, a, b, nbytes, flows) - hidden)
                if a != b:
                    link += t
                    link_bytes += count * nbytes * flows
                else:
                    local += t
        notes = [f"{p}x{q} grid; {len(set(sites))} site(s); Kruse's bound on the speed-up: "
                 f"{kruse_speedup_bound(ranks):.2f}"]
        # Orders after the first of one HPL run reuse its connections, their windows
        # already grown to the previous order's messages (a cold N = 2000 on icm-task's
        # G1W1 took 0.42 s, the same N after N = 1500 in one run 0.31 s).
        grown = [nbytes for _, _, _, nbytes, _ in
                 _panel_steps(after, nb, p, q, (row_pair, 1), (col_pair, 1), 0.0)] if after else None
        warm = _slow_start_s(fed, cal, first.values(), grown)
        if warm:
            link += warm
            notes.append(f"TCP slow start across the link: {warm * 1e3:.0f} ms")
        forwarding = cal.crossing_cpu_s(link_bytes, ranks, compute, compute + local + link)
        if forwarding:
            link += forwarding
            notes.append(f"the testbed's link emulator forwarding {link_bytes / 1e6:.0f} MB on the ranks' "
                         f"{cal.host_cores} cores: {forwarding * 1e3:.0f} ms")
        return prediction(self.name, placement, compute=compute, local_comm=local, link_comm=link,
                          link_bytes=link_bytes, notes=notes)

    @staticmethod
    def _flop_s(cal, site: str, n: int) -> float:
        ns = cal.value(site, "hpl_n", "HPL one-node runs")
        per = cal.value(site, "hpl_flop_ns", "HPL one-node runs")
        # Within the measured orders the rate is interpolated; beyond them it is held
        # at the nearest measurement (a node's DGEMM rate saturates as N grows).
        return interpolate(ns, per, n, beyond="flat") / 1e9 if n >= ns[0] else per[0] / 1e9


def _panel_steps(m: int, nb: int, p: int, q: int, row, col, hidden: float) -> list[tuple]:
    """One panel's messages with m rows left: (pair, flows, messages, bytes, seconds of
    them hidden behind computation) per step, `row` and `col` the (pair, flows) its
    process rows and columns send between."""
    steps = []
    if p > 1:
        steps.append((*col, nb * math.log2(p), 2 * nb * DOUBLE, 0.0))  # panel factorisation
        swaps = math.log2(p) + p - 1
        steps.append((*col, swaps, 3 * m * nb / q * DOUBLE / swaps, 0.0))  # row swaps
    if q > 1:
        steps.append((*row, 1, m * nb / p * DOUBLE, hidden))  # panel broadcast
    # Backward substitution (HPL_pdtrsv), per block: the solution block down its
    # process column, then the partial update to the next process column.
    if p > 1:
        steps.append((col[0], 1, 1, nb * DOUBLE, 0.0))
    if q > 1:
        steps.append((row[0], 1, 1, nb * DOUBLE, 0.0))
    return steps


def _slow_start_s(fed, cal, firsts, grown: list[float] | None = None) -> float:
    """Round trips the TCP connections across the link spend opening their windows.

    Each connection starts cold and its first large message grows the window from 10
    segments, a round trip per doubling (network.slow_start_rounds); both ways of a
    step (the broadcast's source column alternates, pivots go up and down) start
    cold once. Later panels find the window open: they follow each other faster than
    Linux's restart after an idle RTO (200 ms at least). `grown`: per step, the bytes
    an earlier order of the same run already opened the window to; only the doublings
    beyond them are paid. Over InfiniBand there is none.
    """
    if cal.transport != "tcp":
        return 0.0
    total = 0.0
    for i, ((a, b), flows, nbytes) in enumerate(firsts):
        if a == b:
            continue
        r = route(fed, a, b, cal)
        bdp = (r.share_Bps(flows) or 0.0) * r.rtt_s
        rounds = slow_start_rounds(nbytes, bdp)
        if grown:
            rounds = max(0, rounds - slow_start_rounds(grown[i], bdp))
        total += 2 * rounds * r.rtt_s
    return total


def _worst(groups: list[list[str]]) -> tuple[tuple[str, str], int]:
    """The pair of sites a group's messages travel between (a crossing one when any
    group crosses the link), and how many groups cross it at once."""
    crossing = [g for g in groups if len(set(g)) > 1]
    if crossing:
        g = crossing[0]
        return (g[0], next(s for s in g if s != g[0])), len(crossing)
    return (groups[0][0], groups[0][0]), 1


# Seed 001 slide 21 (n_p = 40000): what the Kruse model gave for a faster shared link.
SEED_001_BANDWIDTH_GAINS = {2.0: 0.25, 10.0: 1.00}


def speedup_curve(fed, cal, n: int, nb: int, ranks_per_node: int, ranks: list[int]) -> list[dict]:
    """Seed 001's figures (slides 18 and 19): HPL's speed-up T(1) / T(p) against p, with
    the p ranks at the first site ("one site", while it holds them) and split evenly over
    the first two ("two sites"). T(1) is the compute of one rank: the seed's speed-ups
    divide by the same single-processor time."""
    a, b = fed.sites[0], fed.sites[1]
    model, rows = Hpl(), []
    t1 = flops(n) * model._flop_s(cal, a.code, n)
    for p in ranks:
        row = {"ranks": p, "kruse_bound": kruse_speedup_bound(p)}
        for key, groups in (("one_site", [(a, p)]), ("two_sites", [(a, p // 2), (b, p // 2)])):
            nodes_each = [k // ranks_per_node for _, k in groups]
            if any(k % ranks_per_node or k == 0 for _, k in groups) or \
                    any(m > site.nodes for (site, _), m in zip(groups, nodes_each)):
                continue
            code = "".join(f"{site.code}{m}" for (site, _), m in zip(groups, nodes_each))
            pred = model.predict(fed, cal, code, parse_placement(code, fed).nodes(fed),
                                 HplParams((n,), nb, ranks_per_node=ranks_per_node))
            row[key] = {"placement": code, "time_s": pred.total_s, "speedup": t1 / pred.total_s,
                        "parts": dict(pred.parts), "link_bytes": pred.link_bytes}
        rows.append(row)
    return rows


MODELS = (Hpl(),)
