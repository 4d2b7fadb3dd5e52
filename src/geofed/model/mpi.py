"""MPI micro-benchmarks on a placement: ping-pong latency, windowed bandwidth, allreduce.

Point to point is between the placement's first two nodes (ranks 0 and 1, as
`geofed bench mpi` places them). Allreduce follows MPICH's algorithms: recursive
doubling for short vectors, reduce-scatter by recursive halving then allgather by
recursive doubling for long ones; a round costs its slowest pair, so every round
whose partners sit at different sites pays the link.
"""

from __future__ import annotations

from geofed.model import Model, Prediction, prediction
from geofed.model.network import mpi_message_s, stream_cap_Bps
from geofed.records.mpi import MpiAllreduceParams, MpiBandwidthParams, MpiLatencyParams

SHORT_ALLREDUCE_BYTES = 2048  # MPICH's switch from recursive doubling to Rabenseifner
ACK_BYTES = 1


def _split(fed, cal, a: str, b: str, nbytes: float) -> tuple[float, float]:
    """(local part, link part) of one message from site a to site b."""
    total = mpi_message_s(fed, cal, a, b, nbytes)
    local = cal.local_latency_s(a, nbytes)
    return local, total - local


def pair_sites(fed, nodes) -> tuple[str, str]:
    if len(nodes) < 2:
        raise ValueError("needs two nodes")
    return nodes[0].site, nodes[1].site


def allreduce_rounds(p: int, size: float) -> list[tuple[list[tuple[int, int]], float]]:
    """MPICH's allreduce of `size` bytes over `p` ranks as rounds of (pairs of ranks, bytes).

    Beyond a power of two (MPIR_Allreduce_intra_recursive_doubling and its
    reduce-scatter/allgather twin): the first 2 x rem ranks pair up, each even one
    folding into the odd one after it, which takes part in the power-of-two rounds as
    rank i // 2 (the others as rank - rem) and hands the result back at the end."""
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2

    def real(r: int) -> int:  # a rank of the power-of-two rounds as a rank of the communicator
        return 2 * r + 1 if r < rem else r + rem

    def pairs(mask: int) -> list[tuple[int, int]]:
        return [(real(r), real(r ^ mask)) for r in range(pof2)]
    rounds: list[tuple[list[tuple[int, int]], float]] = []
    if rem:
        rounds.append(([(2 * i, 2 * i + 1) for i in range(rem)], size))
    if size <= SHORT_ALLREDUCE_BYTES or pof2 == 1:
        mask = 1
        while mask < pof2:
            rounds.append((pairs(mask), size))
            mask <<= 1
    else:
        halving, mask, half = [], pof2 >> 1, size
        while mask >= 1:
            half /= 2
            halving.append((pairs(mask), half))
            mask >>= 1
        rounds += halving + halving[::-1]
    if rem:
        rounds.append(([(2 * i + 1, 2 * i) for i in range(rem)], size))
    return rounds


class Latency(Model, name="mpi-latency", measured_unit="us", Params=MpiLatencyParams):
    """MPI ping-pong: one-way time of a message (OSU latency)"""

    def predict(self, fed, cal, placement, nodes, params) -> Prediction:
        a, b = pair_sites(fed, nodes)
        local, link = _split(fed, cal, a, b, params.size)
        return prediction(self.name, placement, local_comm=local, link_comm=link,
                          link_bytes=2 * params.size if a != b else 0.0)


class Bandwidth(Model, name="mpi-bw", measured_unit="MB/s", Params=MpiBandwidthParams):
    """MPI bandwidth: a window of messages, then an acknowledgement (OSU bw); time per window"""

    def predict(self, fed, cal, placement, nodes, params) -> Prediction:
        a, b = pair_sites(fed, nodes)
        first_local, first_link = _split(fed, cal, a, b, params.size)
        # the rest follow at the local path's pace for this size (per-message cost included),
        # or at the link's (its rate, one send buffer per round trip) where that is slower
        gap = cal.local_gap_s(a, params.size)
        rest_local = (params.window - 1) * gap
        rest_link = (params.window - 1) * max(0.0, params.size / stream_cap_Bps(fed, cal, a, b) - gap)
        ack_local, ack_link = _split(fed, cal, b, a, ACK_BYTES)
        return prediction(self.name, placement, local_comm=first_local + rest_local + ack_local,
                          link_comm=first_link + rest_link + ack_link,
                          link_bytes=params.window * params.size if a != b else 0.0)

    @staticmethod
    def rate_MBps(pred: Prediction, params: MpiBandwidthParams) -> float:
        return params.window * params.size / pred.total_s / 1e6


class Allreduce(Model, name="mpi-allreduce", measured_unit="us", Params=MpiAllreduceParams):
    """MPI allreduce of a vector over every rank of the placement (one rank per node)"""

    def predict(self, fed, cal, placement, nodes, params) -> Prediction:
        sites = [n.site for n in nodes]
        local = link = link_bytes = 0.0
        for pairs, nbytes in allreduce_rounds(len(sites), params.size):
            costs = [(_split(fed, cal, sites[x], sites[y], nbytes), sites[x] != sites[y]) for x, y in pairs]
            (l_part, k_part), _ = max(costs, key=lambda c: sum(c[0]))
            local += l_part
            link += k_part
            link_bytes += nbytes * sum(1 for _, crosses in costs if crosses)
        return prediction(self.name, placement, local_comm=local, link_comm=link, link_bytes=link_bytes)


MODELS = (Latency(), Bandwidth(), Allreduce())
