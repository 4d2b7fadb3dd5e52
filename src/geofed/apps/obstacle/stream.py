"""Bulk transfer over one P2PSAP synchronous session between two ranks: the
`p2psap-stream` workload's ranks, part of `geofed bench obstacle`.

Rank 0 sends `mbytes` in messages of `message` bytes, each stamped with its
index and filled with a pattern derived from it, then flushes (waits until the
peer acknowledged everything); rank 1 receives and checks every message: in order,
exactly once, intact. Two goodputs: the whole transfer (bytes / time from the
first send to the flush returning, so slow start and the last acknowledgement
count) and the steady state (the receiver's clock, from the message that ends the
first quarter to the last one), the figure to set beside a TCP stream measured
after a warm-up. MPI only exchanges the endpoint address and the secret, as in dist.py.
"""

from __future__ import annotations

import secrets
import time

import numpy as np

from geofed import runtime
from geofed.apps.obstacle.dist import my_address

TAG = 7


def _words(index: int, size: int) -> np.ndarray:
    """The message as little-endian words: its index, then a pattern derived from it."""
    words = np.full(max(size // 8, 1), index * 0x9E3779B97F4A7C15 % 2**64, dtype="<u8")
    words[0] = index
    return words


def payload(index: int, size: int) -> bytes:
    # Built in place and copied once: at gigabits per second the sender's and the
    # checker's Python share the cores with the protocol.
    return _words(index, size).tobytes()


def intact(data: bytes, index: int, size: int) -> bool:
    """data == payload(index, size), compared in place, without building the expected bytes."""
    expected = _words(index, size)
    return len(data) == expected.nbytes and np.array_equal(np.frombuffer(data, dtype="<u8"), expected)


def steady_mbps(arrived: list[float], size: int) -> float | None:
    """Goodput after the first quarter of the messages (slow start), on the receiver's clock."""
    first = len(arrived) // 4
    if len(arrived) - first < 2 or arrived[-1] <= arrived[first]:
        return None
    return (len(arrived) - 1 - first) * size * 8 / (arrived[-1] - arrived[first]) / 1e6


def transfer(comm, mbytes: float, message: int, location: str, network: str) -> dict | None:
    """Rank 0 sends, rank 1 receives and checks; rank 0 returns both sides' figures, rank 1 None."""
    import geofed_p2psap
    rank = comm.Get_rank()
    count = max(1, int(mbytes * 1e6 // message))
    secret = comm.bcast(secrets.token_bytes(32) if rank == 0 else None, root=0)
    ep = geofed_p2psap.Endpoint(rank, 2, secret)
    try:
        addrs = comm.allgather(f"{my_address()}:{ep.port}")
        if rank == 0:
            ep.connect(1, addrs[1], "sync", location, network)
        else:
            ep.wait_peer(0, 30.0)
        runtime.quiet_barrier(comm)
        if rank == 0:
            t0 = time.perf_counter()
            for i in range(count):
                ep.send(1, TAG, payload(i, message))
            if not ep.flush(1, 600.0):
                raise RuntimeError("the receiver did not acknowledge everything within 600 s")
            seconds = time.perf_counter() - t0
            stats = dict(ep.stats(1))
        else:
            bad = 0
            arrived = []
            for i in range(count):
                got = ep.receive(0, TAG, 600.0)
                arrived.append(time.perf_counter())
                bad += got is None or not intact(got[1], i, message)
            extra = ep.receive(0, TAG, 0.5)  # nothing may follow the last message
            result = {"delivered": count - bad, "corrupt_or_missing": bad, "extra": extra is not None,
                      "steady_mbps": steady_mbps(arrived, message)}
        runtime.quiet_barrier(comm)
        got = comm.bcast(result if rank == 1 else None, root=1)
        if rank != 0:
            return None
        return {"messages": count, "message_bytes": message, "bytes": count * message, "seconds": seconds,
                "transfer_mbps": count * message * 8 / seconds / 1e6, "stack": stats.pop("stack"), "sender": stats,
                **got}
    finally:
        ep.close()
