"""The rehearsal's ranks agree on the instant they start through files, not MPI (a barrier
would open the connections across the link before their clocks start)."""

import multiprocessing
import time

from geofed.workloads import rehearse


def _rank(directory, rank, ranks, out):
    ready = time.time()
    instant = rehearse.agreed_start(directory, rank, ranks)
    rehearse.wait_until(instant)
    out.put((rank, ready, instant, time.time()))


def test_every_rank_starts_at_one_instant_after_the_last_is_ready(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(tmp_path, r, 3, out)) for r in (2, 1, 0)]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    instants = {instant for _, _, instant, _ in got}
    assert len(instants) == 1
    (instant,) = instants
    assert instant > max(ready for _, ready, _, _ in got)  # set once every rank was ready
    assert all(started >= instant for *_, started in got)
