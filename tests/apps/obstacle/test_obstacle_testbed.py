"""The obstacle solver across two testbed sites with a 9 ms link that loses 3 % of
its frames: P2PSAP sync, async and hybrid peers started by `geofed run`, and the
MPI baseline, all agree with sequential projected SOR within the certified bound."""

import json

import numpy as np
import pytest

from conftest import needs_root, run_geofed
from geofed import federation
from geofed.apps.obstacle import bench, job
from geofed.apps.obstacle import problem as P
from geofed.launch.placement import parse

pytestmark = [pytest.mark.root, pytest.mark.slow, needs_root]

# 3 % loss: at 1 % a short sync run could cross the link without losing a data frame.
N, TOL, LOSS = 16, 1e-8, 0.03


@pytest.fixture(scope="module")
def lossy():
    from geofed.testbed import core as tb
    with tb.owned_copy(federation.load("icm-task"), "gftest-obst", loss=LOSS) as fed:
        yield fed


@pytest.fixture(scope="module")
def reference():
    p = P.default_3d(N)
    ref = P.sor(p)
    return p, ref, p.error_bound(P.residual(p, ref))


@pytest.mark.parametrize("scheme,placement", [("async", "G1W2"), ("sync", "G1W1"), ("hybrid", "G1W2"), ("mpi", "G1W1")])
def test_across_a_lossy_link_agrees_with_sor(lossy, reference, scheme, placement):
    p, ref, ref_bound = reference
    assert lossy.links[0].loss == LOSS
    res = job.run_on_placement(lossy, parse(placement, lossy), job.Spec(N, TOL, scheme), timeout=240)
    assert res["certified_residual"] <= TOL
    # the stop certified the vector that came back, not a stale or mixed one
    assert res["recomputed_residual"] <= res["certified_residual"] * (1 + 1e-9) + 1e-15
    assert np.max(np.abs(res["u"] - ref)) <= p.error_bound(res["certified_residual"]) + ref_bound
    assert {q["site"] for q in res["peers"]} == {"G", "W"}
    if scheme != "mpi":
        # the protocol saw the lossy link: some data segment was lost and resent or superseded
        counters = [c for q in res["peers"] for c in q["protocol"].values()]
        assert sum(c["retransmissions"] + c["lost"] for c in counters) > 0


def test_bulk_stream_delivers_everything_across_the_lossy_link(lossy):
    res = bench.stream(lossy, "G1W1", 4, "eth", timeout=300)  # 4 MB in 1 MiB messages
    assert res["messages"] == 3 and res["delivered"] == 3 and res["corrupt_or_missing"] == 0 and not res["extra"]
    # The loss was met and repaired, frame by frame: when the emulator drew loss once per
    # 64 KB GSO super-frame this stream crossed without a loss in about one run in four.
    # Of ~2300 segments 3 % are lost (sd ~8); half of that is far outside chance.
    sender = res["sender"]
    assert sender["retransmissions"] >= LOSS / 2 * sender["segments_sent"], sender
    assert 0 < res["transfer_mbps"] < lossy.links[0].bandwidth_gbps * 1e3


def test_command_writes_solution_history_and_record(lossy, reference, tmp_path):
    p, ref, ref_bound = reference
    out = tmp_path / "out"
    r = run_geofed("obstacle", "-f", str(lossy.path), "-p", "G1W1", "--n", str(N), "--tol", str(TOL),
                   "--scheme", "async", "--out", str(out), timeout=300)
    assert r.returncode == 0, r.stderr
    rec = json.loads(next(out.glob("obstacle.run-*.json")).read_text())
    assert rec["kind"] == "obstacle.run" and rec["meta"]["federation"] == lossy.name
    d = rec["data"]
    assert d["certified_residual"] <= TOL and len(d["peers"]) == 2
    assert all(q["iterations"] > 0 for q in d["peers"])
    assert d["residual_history"][-1][1] == d["certified_residual"]
    u = np.load(out / "solution.npy")
    assert np.max(np.abs(u - ref)) <= p.error_bound(d["certified_residual"]) + ref_bound
    assert (out / "residual-history.csv").read_text().startswith("seconds,certified_residual\n")
