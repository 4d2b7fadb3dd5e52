"""`geofed bench obstacle`: seed 003's Table III and the reliable stack against TCP, on the testbed.

Solver part: time to a certified residual for P2PSAP sync and async and for the
MPI baseline (synchronous projected Jacobi on mpi4py), inside one site and across
the long-haul link; the cells of one repeat run back to back, so the host's noise
falls on all of them alike, and the table shows medians.

Throughput part: one synchronous P2PSAP session across the link (the Table I stack
sync/inter/Eth: NewReno, and sync/inter/fabric: a TCP stream with the block
discipline) against one TCP stream on the same path (geofed-probe), then the
Ethernet stack again on a copy of the federation whose link loses 1 % of frames,
which must still deliver every message, in order, intact.

The lossy link is always a private copy of the federation (own name), taken down at the end;
so is the clean one for `geofed bench obstacle` (the demo runs on its own testbed).
"""

from __future__ import annotations

import statistics
from contextlib import nullcontext

from geofed.errors import UserError

SCHEMES = ("sync", "async", "mpi")


def solver_rows(fed, placements: list[str], n: int, tol: float, repeat: int, progress) -> list[dict]:
    from geofed.apps.obstacle import job
    from geofed.launch.placement import parse
    rows = []
    for code in placements:
        runs = {s: [] for s in SCHEMES}
        for r in range(repeat):
            for scheme in SCHEMES:
                progress(f"bench obstacle: {code} {scheme} run {r + 1}/{repeat}")
                res = job.run_on_placement(fed, parse(code, fed), job.Spec(n, tol, scheme), timeout=600)
                runs[scheme].append({"seconds": res["time_to_solution_s"], "certified_residual": res["certified_residual"],
                                     "iterations": [p["iterations"] for p in res["peers"]]})
        nodes = parse(code, fed).nodes(fed)
        row = {"placement": code, "peers": len(nodes), "across_link": len({n.site for n in nodes}) > 1, "runs": runs}
        for s in SCHEMES:
            row[f"{s}_s"] = statistics.median(x["seconds"] for x in runs[s])
            row[f"{s}_iterations"] = statistics.median(max(x["iterations"]) for x in runs[s])
        row["async_speedup_vs_mpi"] = row["mpi_s"] / row["async_s"]
        rows.append(row)
    return rows


def stream(fed, placement: str, mbytes: float, network: str, timeout: float = 900) -> dict:
    """One P2PSAP session across the link (the `p2psap-stream` workload's two ranks): rank 0's figures."""
    from geofed.launch import runner
    from geofed.launch.placement import parse
    return runner.run_ranks(fed, parse(placement, fed), "p2psap-stream",
                            {"mbytes": mbytes, "location": "inter", "network": network}, timeout=timeout,
                            cpu_limit=False, what=f"P2PSAP stream on {placement}")  # measures the path, not the quota


def link_pair(fed) -> tuple[str, str]:
    """First node of the second site (rank 0, the sender) and of the first site."""
    return fed.sites[1].node_list()[0].name, fed.sites[0].node_list()[0].name


THROUGHPUT_ROWS = (("p2psap_eth", "P2PSAP sync/inter/Eth"), ("p2psap_fabric", "P2PSAP sync/inter/fabric"),
                   ("tcp", "TCP, one stream (cubic)"))


def throughput(fed, mbytes: float, repeat: int, progress) -> dict:
    """Each P2PSAP stack and one TCP stream over the same path, two ways: the transfer of
    the same bytes from a standing start (slow start and the last acknowledgement count)
    and the steady state after it (P2PSAP: the last three quarters of the messages on the
    receiver's clock; TCP: 5 s after 2 s of warm-up)."""
    from geofed.testbed import probe
    from geofed.testbed.plan import make_plan
    plan = make_plan(fed)
    b, a = link_pair(fed)
    runs = {k: [] for k, _ in THROUGHPUT_ROWS}
    for r in range(repeat):
        progress(f"bench obstacle: throughput run {r + 1}/{repeat} ({b} -> {a})")
        for network in ("eth", "fabric"):
            runs[f"p2psap_{network}"].append(stream(fed, b + a, mbytes, network))
        transfer = probe.throughput_mbps(plan.node(b), plan.node(a), streams=1, nbytes=runs["p2psap_eth"][-1]["bytes"])
        steady = probe.throughput_mbps(plan.node(b), plan.node(a), streams=1, seconds=5, warmup=2)
        runs["tcp"].append({"transfer_mbps": transfer, "steady_mbps": steady})
    med = {key: {m: statistics.median(x[f"{m}_mbps"] for x in runs[key]) for m in ("transfer", "steady")}
           for key in runs}
    rows = [{"key": key, "what": what,
             **{f"{m}_mbps": v for m, v in med[key].items()},
             **{f"{m}_of_tcp": v / med["tcp"][m] for m, v in med[key].items()}} for key, what in THROUGHPUT_ROWS]
    return {"pair": [b, a], "mbytes": mbytes, "runs": runs, "rows": rows}


def check(fed, placements: str, on_copies: bool) -> list[str]:
    """The placement codes, refused (UserError) before anything is brought up if they do not fit."""
    from geofed.launch.placement import parse
    from geofed.testbed import core as tb
    if on_copies:
        tb.require_root("benchmark the obstacle solver on")
    if len(fed.sites) < 2:
        raise UserError(f"{fed.name}: the benchmark needs two sites joined by a link")
    codes = [c.strip() for c in placements.split(",") if c.strip()]
    for c in codes:
        parse(c, fed)
    return codes


def measure(fed, placements: str, n: int, tol: float, repeat: int, part: str, mbytes: float, loss: float,
            private: bool, progress) -> dict:
    """The parts asked for (all, solver or throughput): on `fed`'s testbed, which is up, or on a
    private copy of it (`private`); the lossy stream always on a private copy with a lossy link."""
    from geofed.testbed import core as tb
    codes = check(fed, placements, private or part != "solver")
    data = {"n": n, "tol": tol, "repeat": repeat, "link_rtt_ms": fed.links[0].rtt_ms}
    with tb.owned_copy(fed, "gfobst", progress) if private else nullcontext(fed) as clean:
        if part in ("all", "solver"):
            data["solver"] = solver_rows(clean, codes, n, tol, repeat, progress)
        if part in ("all", "throughput"):
            data["throughput"] = throughput(clean, mbytes, repeat, progress)
    if part in ("all", "throughput"):
        with tb.owned_copy(fed, "gfobst-loss", progress, loss=loss) as lossy:
            progress(f"bench obstacle: P2PSAP stream at {loss:g} link loss")
            data["lossy"] = {"loss": loss, **stream(lossy, "".join(link_pair(lossy)), mbytes, "eth")}
    return data


def format_table(d: dict) -> str:
    out = []
    if d.get("solver"):
        out.append(f"time to a certified residual <= {d['tol']:g}, n = {d['n']} (medians of {d['repeat']}; "
                   f"iterations of the slowest peer)")
        out.append(f"{'placement':<10} {'peers':>5} {'link':>5} {'P2PSAP sync':>16} {'P2PSAP async':>16} "
                   f"{'MPI Jacobi':>16} {'async vs MPI':>12}")
        for r in d["solver"]:
            cell = lambda s: f"{r[s + '_s']:7.3f} s {r[s + '_iterations']:>6.0f}"
            out.append(f"{r['placement']:<10} {r['peers']:>5} {'yes' if r['across_link'] else 'no':>5} {cell('sync'):>16} "
                       f"{cell('async'):>16} {cell('mpi'):>16} {r['async_speedup_vs_mpi']:>11.1f}x")
    if d.get("throughput"):
        t = d["throughput"]
        out.append(f"one session {t['pair'][0]} -> {t['pair'][1]} across the {d['link_rtt_ms']:.3g} ms link "
                   f"(medians of {d['repeat']}; of TCP: of the same measure of one TCP stream)")
        out.append(f"{'':<26} {'transfer of ' + format(t['mbytes'], 'g') + ' MB':>22} {'steady state':>22}")
        for r in t["rows"]:
            cell = lambda m: f"{r[m + '_mbps']:6.0f} Mb/s {100 * r[m + '_of_tcp']:6.1f} %"  # noqa: E731
            out.append(f"  {r['what']:<24} {cell('transfer'):>22} {cell('steady'):>22}")
    if d.get("lossy"):
        l = d["lossy"]
        out.append(f"  at {100 * l['loss']:g} % link loss: P2PSAP sync/inter/Eth {l['transfer_mbps']:.0f} Mb/s, delivered "
                   f"{l['delivered']}/{l['messages']} intact, {l['sender']['retransmissions']} retransmissions, "
                   f"{l['sender']['timeouts']} timeouts")
    return "\n".join(out)
