"""What a solve leaves behind (the solution, its residual history, the peers' counters)
and what a terminal shows of its `obstacle.run` record."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write(result: dict, out: str | Path) -> dict[str, str]:
    """solution.npy, residual-history.csv, peers.csv in `out`; their paths."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    files = {"solution": d / "solution.npy", "history": d / "residual-history.csv", "peers": d / "peers.csv"}
    np.save(files["solution"], result["u"])
    files["history"].write_text("seconds,certified_residual\n" + "".join(f"{t:.6f},{r:.6e}\n" for t, r in result["residual_history"]))
    files["peers"].write_text("rank,node,site,planes,iterations,seconds,halos_received,snapshots\n" + "".join(
        f"{p['rank']},{p['node']},{p['site']},{p['hi'] - p['lo']},{p['iterations']},{p['seconds']:.6f},"
        f"{p['halos_received']},{p['snapshots']}\n" for p in result["peers"]))
    return {k: str(v) for k, v in files.items()}


def table(d) -> str:
    """Every peer's share and counters, the solve's time and residuals, and the files."""
    lines = [f"{'rank':>4} {'node':>4} {'planes':>6} {'iterations':>10} {'seconds':>8}"]
    lines += [f"{p['rank']:>4} {p['node']:>4} {p['hi'] - p['lo']:>6} {p['iterations']:>10} {p['seconds']:>8.3f}"
              for p in d.peers]
    lines.append(f"{d.scheme} on {d.placement}: {d.time_to_solution_s:.3f} s to a certified residual "
                 f"{d.certified_residual:.3g} <= {d.tol:g} (recomputed {d.recomputed_residual:.3g}), "
                 f"max error <= {d.error_bound:.3g}")
    lines.append(f"results: {d.files['solution']}, {d.files['history']}, {d.files['peers']}")
    return "\n".join(lines)
