"""The floor beside the link, measured the way a short link needs it: interleaved.

`testbed up` measures the probe's floor once (core._start_emulator). On a 145 us link
5 % is 4 us, less than this host's drift between two measurements a few seconds
apart, so a benchmark that holds a link against its fibre measures in blocks that
alternate: the emulator holds core.FLOOR_HOLD_US (the floor, less those holds), then
the fibre's propagation (the link), for the UDP probe and for a 1-byte MPI ping-pong,
and takes the median of the blocks. The last MPI floor is kept in the testbed's state
beside the probe's.
"""

from __future__ import annotations

import statistics

from geofed.launch import runner
from geofed.launch.placement import parse
from geofed.testbed import core, probe
from geofed.testbed.plan import make_plan

BLOCKS = 3


def mpi_latency_us(fed, a: str, b: str, iterations: int) -> dict:
    """Min and median one-way time of 1-byte MPI ping-pongs between the first nodes of sites a and b."""
    data = runner.run_ranks(fed, parse(f"{a}1{b}1", fed), "mpi",
                            {"benchmarks": "latency", "sizes": "1", "iterations": iterations, "budget": 5},
                            what="MPI latency")
    stats = data["results"][0]["sizes"][0]["stats"]
    return {"min": stats["min"], "median": stats["p50"]}


def measure_link(fed, a_node, b_node, count: int) -> dict:
    """Probe (one-way = RTT/2) and MPI one-way, us: measured and floor, from interleaved blocks."""
    plan = make_plan(fed)
    link = fed.links[0]
    hold = core.FLOOR_HOLD_US
    per_block = max(50, count // BLOCKS)
    blocks = {"probe": [], "probe_floor": [], "mpi": [], "mpi_floor": []}
    probe_min = mpi_min = float("inf")
    try:
        for _ in range(BLOCKS):
            core.restart_link(plan, link.name, hold)
            floor_rtt, _ = probe.rtt_samples_ms(a_node, b_node, count=per_block)
            blocks["probe_floor"].append(statistics.median(floor_rtt) / 2 * 1e3 - hold)
            blocks["mpi_floor"].append(mpi_latency_us(fed, link.a, link.b, per_block)["median"] - hold)
            core.restart_link(plan, link.name)
            rtt, _ = probe.rtt_samples_ms(a_node, b_node, count=per_block)
            blocks["probe"].append(statistics.median(rtt) / 2 * 1e3)
            probe_min = min(probe_min, min(rtt) / 2 * 1e3)
            mpi = mpi_latency_us(fed, link.a, link.b, per_block)
            blocks["mpi"].append(mpi["median"])
            mpi_min = min(mpi_min, mpi["min"])
    finally:
        core.restart_link(plan, link.name)
    med = {k: statistics.median(v) for k, v in blocks.items()}
    # each block's link less the floor measured just before it: their scatter is the
    # measurement's own, what the host's drift does to a contribution on this link
    paired = {w: [x - f for x, f in zip(blocks[w], blocks[f"{w}_floor"])] for w in ("probe", "mpi")}
    state = core.read_state(plan)
    state["emulators"][link.name]["floor"]["mpi_one_way_us"] = {"median": med["mpi_floor"]}
    core.write_state(plan, state)
    return {
        "probe": {"min_one_way_us": probe_min, "median_one_way_us": med["probe"],
                  "floor_one_way_us": med["probe_floor"], "contribution_us": med["probe"] - med["probe_floor"],
                  "block_contributions_us": paired["probe"]},
        "mpi": {"min_one_way_us": mpi_min, "median_one_way_us": med["mpi"],
                "floor_one_way_us": med["mpi_floor"], "contribution_us": med["mpi"] - med["mpi_floor"],
                "block_contributions_us": paired["mpi"]},
        "blocks": BLOCKS, "samples_per_block": per_block,
    }
