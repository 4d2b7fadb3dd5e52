"""IMB's Exchange pattern: every rank trades a message with both neighbours of a ring.

Each iteration a rank posts receives from its left and right neighbours and sends one
buffer to each (IMB-MPI1 Exchange: two sends and two receives per rank; the ring is
the ranks in placement order, so on G2W2 two of its four edges cross the link). The
time of an iteration is the slowest rank's (t_max); the bandwidth is IMB's 4 X / t_max.
After the timed loop one more exchange carries a pattern that names its sender and
direction, and every byte received is checked: the sanity check.

    geofed bench exchange -f icm-task -p G2W2 --sizes 1:1M
"""

from __future__ import annotations

from geofed import validate
from geofed.params import Params, param
from geofed.records import Sanity
from geofed.workloads import RankWorkload

TAG_RIGHTWARD, TAG_LEFTWARD = 1, 2


class ExchangeParams(Params):
    sizes: str = param("1:1M", "message sizes: MIN:MAX (powers of 2) or a list like 1,64K,1M")
    budget: float = param(0.2, "seconds of timed exchanges per size")
    warmup: int = param(2, "untimed exchanges per size")
    max_iterations: int = param(1000, "most timed exchanges per size")


def pattern(np, sender: int, tag: int, size: int):
    """The bytes `sender` sends with `tag`: different for every sender and direction."""
    return ((np.arange(size, dtype=np.uint32) * 7 + sender * 131 + tag * 17) % 251).astype(np.uint8)


class Exchange(RankWorkload, kind="workload.result", Params=ExchangeParams, min_nodes=2):
    """IMB's Exchange: every rank trades messages with both ring neighbours; t_max and 4X/t_max per size"""

    def check(self, ctx, params: ExchangeParams) -> None:
        super().check(ctx, params)
        validate.parse_sizes(params.sizes, "--sizes")

    def rank(self, comm, params: ExchangeParams) -> dict | None:
        import numpy as np
        from mpi4py import MPI

        from geofed import runtime
        sizes = validate.parse_sizes(params.sizes, "--sizes")
        me, n = comm.Get_rank(), comm.Get_size()
        left, right = (me - 1) % n, (me + 1) % n
        where = runtime.rank_map(comm)

        def exchange(to_right, to_left, from_left, from_right):
            MPI.Request.Waitall([comm.Irecv(from_left, left, TAG_RIGHTWARD), comm.Irecv(from_right, right, TAG_LEFTWARD),
                                 comm.Isend(to_right, right, TAG_RIGHTWARD), comm.Isend(to_left, left, TAG_LEFTWARD)])

        rows = []
        for size in sizes:
            send = np.zeros(size, np.uint8)
            from_left, from_right = np.empty(size, np.uint8), np.empty(size, np.uint8)
            for _ in range(params.warmup):
                exchange(send, send, from_left, from_right)
            # As many iterations as the budget holds, judged from one exchange and agreed by all.
            comm.Barrier()
            t0 = MPI.Wtime()
            exchange(send, send, from_left, from_right)
            once = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
            iterations = max(1, min(params.max_iterations, int(params.budget / max(once, 1e-9))))
            comm.Barrier()
            t0 = MPI.Wtime()
            for _ in range(iterations):
                exchange(send, send, from_left, from_right)
            t = (MPI.Wtime() - t0) / iterations
            times = comm.gather(t, root=0)
            exchange(pattern(np, me, TAG_RIGHTWARD, size), pattern(np, me, TAG_LEFTWARD, size), from_left, from_right)
            wrong = int(np.count_nonzero(from_left != pattern(np, left, TAG_RIGHTWARD, size))
                        + np.count_nonzero(from_right != pattern(np, right, TAG_LEFTWARD, size)))
            wrong = comm.reduce(wrong, op=MPI.SUM, root=0)
            if me == 0:
                t_max = max(times)
                rows.append({"size": size, "iterations": iterations, "t_min_us": min(times) * 1e6,
                             "t_avg_us": sum(times) / n * 1e6, "t_max_us": t_max * 1e6,
                             "MBps": 4 * size / t_max / 1e6, "wrong_bytes": wrong})
        if me != 0:
            return None
        nodes = [w["node"] or w["host"] for w in where]
        edges = {runtime.pair_class(nodes[i], nodes[(i + 1) % n]) for i in range(n)}
        return {"ranks": where, "class": next(c for c in ("inter-site", "intra-site", "intra-node") if c in edges),
                "rows": rows}

    def sanity(self, rec) -> Sanity:
        bad = [r for r in rec.data.result["rows"] if r["wrong_bytes"]]
        if bad:
            return Sanity(False, f"{bad[0]['wrong_bytes']} bytes arrived wrong at {bad[0]['size']} B")
        return Sanity(True, f"every byte of {len(rec.data.result['rows'])} sizes checked")

    def figures(self, rec) -> dict[str, float]:
        return {f"{k}@{r['size']}": r[k] for r in rec.data.result["rows"] for k in ("t_max_us", "MBps")}

    def table(self, rec) -> str:
        d = rec.data.result
        lines = [f"# IMB Exchange on {rec.data.placement} ({len(d['ranks'])} ranks, ring {d['class']})",
                 f"{'#bytes':>10} {'#repetitions':>12} {'t_min[usec]':>12} {'t_max[usec]':>12} {'t_avg[usec]':>12} "
                 f"{'Mbytes/sec':>11} {'check':>6}"]
        for r in d["rows"]:
            lines.append(f"{r['size']:>10} {r['iterations']:>12} {r['t_min_us']:>12.2f} {r['t_max_us']:>12.2f} "
                         f"{r['t_avg_us']:>12.2f} {r['MBps']:>11.2f} {'ok' if not r['wrong_bytes'] else 'WRONG':>6}")
        return "\n".join(lines)


WORKLOAD = Exchange()
