"""`geofed bench hpl-sweep`: seed 002's HPL tables and seed 001's comparison, on the testbed.

On a private copy of the federation (its own name, brought up here and always taken
down): first each site's peak, measured by a one-node DGEMM run (recorded as measured;
the federation file declares no peak); then HPL on every
placement for every N, `repeat` times, medians. Per placement P and order N:
  T(P, N)   HPL's time;
  S(P, N)   T(one node, N) / T(P, N), the one node being the first of the first site;
  SP(P, N)  HPL's GFLOPS (sustained performance);
  SPF(P, N) SP / PP(P), PP the sum of the peaks of the placement's nodes.
With `--peer`, the same HPL with the same rank count on this host without the testbed
(plain mpiexec, no namespaces): what the emulation costs, as a ratio.
Like `bench hpl`, without the nodes' CPU quotas (docs/hpl.md: HPL's polling ranks
are throttled under one, which varied the times 2-4 fold from run to run).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import statistics
import tempfile
from pathlib import Path

from geofed.apps.hpl import run
from geofed.errors import JobFailed, UserError
from geofed.launch import runner
from geofed.launch.placement import Placement, parse
from geofed.records.hpl import HplParams


def site_peaks(fed, progress) -> dict[str, float]:
    """GFLOPS of one node of each site, from DGEMM (no quota, as the HPL runs; one
    OpenBLAS thread, as each HPL rank has)."""
    code = "".join(f"{s.code}1" for s in fed.sites)
    progress(f"hpl sweep: DGEMM on {code} for the peak of each site's nodes")
    data = runner.run_ranks(fed, parse(code, fed), "dgemm", {}, timeout=300, what="hpl sweep peak (DGEMM)",
                            env={"OPENBLAS_NUM_THREADS": "1"})
    return {r["site"]: r["gflops"] for r in data["nodes"]}


def _peer(fed, placement: Placement, params: HplParams, tmp: Path, timeout: float | None) -> dict:
    """The same rank count on this host: one 'node' holding every rank, through a hostfile."""
    hostfile = tmp / "peer-hosts"
    site = placement.sites()[0]
    hostfile.write_text(f"{socket.gethostname()} {site}\n")
    one = dataclasses.replace(params, ranks_per_node=placement.node_count).on(1, "the peer's host")
    return run.run(fed, parse(f"{site}1", fed), one, hostfile=str(hostfile), timeout=timeout)


def sweep(fed, codes: list[str], ns: list[int], nb: int, repeat: int, peer: bool, timeout: float | None,
          progress) -> dict:
    """The tables on `fed`, which is up; `timeout` is each HPL run's."""
    peaks = site_peaks(fed, progress)
    rows = []
    with tempfile.TemporaryDirectory(prefix="geofed-hpl-sweep-") as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)  # the peer's input lives in the current directory, as on a real cluster
        try:
            for code in codes:
                pl = parse(code, fed)
                params = HplParams(tuple(ns), nb).on(pl.node_count, f"placement {code}")
                p, q = params.p, params.q
                runs = []
                for r in range(repeat):
                    progress(f"hpl sweep: {code} ({p}x{q}), N = {','.join(map(str, ns))}, run {r + 1}/{repeat}")
                    runs.append(run.run(fed, pl, params, timeout=timeout))
                peer_runs = []
                if peer:
                    progress(f"hpl sweep: {code}'s peer, {pl.node_count} ranks on this host without the testbed")
                    peer_runs.append(_peer(fed, pl, params, Path(tmp), timeout))
                nodes = pl.nodes(fed)
                pp = sum(peaks[n.site] for n in nodes)
                for i, n in enumerate(ns):
                    if not all(x["rows"][i]["passed"] for x in runs + peer_runs):
                        raise JobFailed(f"hpl sweep: the residual check FAILED on {code} at N = {n}; "
                                        f"no table is made of wrong answers")
                    t = statistics.median(x["rows"][i]["time_s"] for x in runs)
                    sp = statistics.median(x["rows"][i]["gflops"] for x in runs)
                    row = {"placement": code, "nodes": len(nodes), "sites": sorted({x.site for x in nodes}),
                           "p": p, "q": q, "n": n, "nb": nb, "time_s": t, "gflops": sp, "peak_gflops": pp,
                           "spf": sp / pp, "times_s": [x["rows"][i]["time_s"] for x in runs]}
                    if peer_runs:
                        row["peer_time_s"] = peer_runs[0]["rows"][i]["time_s"]
                        row["testbed_over_peer"] = t / row["peer_time_s"]
                    rows.append(row)
        finally:
            os.chdir(cwd)
    for row in rows:
        base = next(r for r in rows if r["n"] == row["n"] and r["nodes"] == 1 and r["placement"] == codes[0])
        row["speedup"] = base["time_s"] / row["time_s"]
    link = fed.links[0] if fed.links else None
    return {"placements": codes, "ns": ns, "nb": nb, "repeat": repeat, "peaks_gflops": peaks,
            "peak_source": "measured: DGEMM (numpy's OpenBLAS, 1 thread) on one node per site",
            "link": None if link is None else {"name": link.name, "rtt_ms": link.rtt_ms,
                                               "bandwidth_gbps": link.bandwidth_gbps},
            "rows": rows}


def format_table(data: dict) -> str:
    head = (f"{'placement':<9} {'P':>2} {'N':>6} {'T [s]':>8} {'S':>6} {'SP [GFLOPS]':>12} {'PP':>7} {'SPF':>6}"
            + (f" {'peer T':>8} {'T/peer':>7}" if any("peer_time_s" in r for r in data["rows"]) else ""))
    lines = [head]
    for r in data["rows"]:
        line = (f"{r['placement']:<9} {r['nodes']:>2} {r['n']:>6} {r['time_s']:>8.2f} {r['speedup']:>6.2f} "
                f"{r['gflops']:>12.3f} {r['peak_gflops']:>7.1f} {r['spf']:>6.1%}")
        if "peer_time_s" in r:
            line += f" {r['peer_time_s']:>8.2f} {r['testbed_over_peer']:>7.2f}"
        lines.append(line)
    lines.append("peak per node (GFLOPS, " + data["peak_source"] + "): "
                 + ", ".join(f"{s} {g:.1f}" for s, g in data["peaks_gflops"].items()))
    return "\n".join(lines)


def check(base, codes: list[str], ns: list[int], nb: int) -> None:
    """Every mistake before a testbed comes up: each placement takes HPL's grid, the first is one node."""
    for code in codes:
        HplParams(tuple(ns), nb).on(parse(code, base).node_count, f"placement {code}")
    if parse(codes[0], base).node_count != 1:
        raise UserError(f"--placements: the first ({codes[0]}) must be one node, the base of the speed-up")


def on_copy(base, codes: list[str], ns: list[int], nb: int, repeat: int, peer: bool, timeout: float | None,
            progress) -> dict:
    """The sweep on a private copy of `base`, brought up here and always taken down."""
    from geofed.testbed import core as tb
    tb.require_root("sweep HPL on")
    with tb.owned_copy(base, "gfhpl", progress) as fed:
        return sweep(fed, codes, ns, nb, repeat, peer, timeout, progress)
