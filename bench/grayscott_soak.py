#!/usr/bin/env python3
"""Soak: the Gray-Scott workflow many times in a row on one testbed, counting crashes.

Each run streams a short simulation (default L = 32, 60 steps, 4 ranks at site G) over
ADIOS2 SST across the 9 ms link to three consumers at site W (pdf analysis, its plot,
the cross-section plot) and checks every step at every consumer against the writer's
digest. A run fails if any part exits non-zero (a consumer's SIGSEGV in EVPath was 5
runs in 20 before sstseed.c) or any step is missing or differs. Nothing is retried.

    sudo .venv/bin/python bench/grayscott_soak.py --runs 200 --out geofed-out/soak

Prints one line per run and a summary; writes soak.json (every run's outcome).
The testbed is a copy of the federation under its own name, always taken down.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from geofed import federation
from geofed.apps.grayscott import settings, stream, workflow
from geofed.testbed import core


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-f", "--federation", default="icm-task")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--L", type=int, default=32)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out", default="geofed-out/soak")
    ap.add_argument("--without-seed-fix", action="store_true",
                    help="start the SST processes without sstseed.c, to see the crash it removes")
    args = ap.parse_args()
    if args.without_seed_fix:
        stream.preload_argv = lambda: []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = federation.load(args.federation)
    s = settings.from_dict({"L": args.L, "steps": args.steps, "plotgap": 10}, "soak")
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="geofed-soak-") as tmp:
        fed = federation.load(federation.derive(base, Path(tmp), f"gfsoak-{os.getpid()}"))
        core.up(fed)
        try:
            for i in range(1, args.runs + 1):
                t0 = time.monotonic()
                run_out = Path(tmp) / f"run-{i}"
                try:
                    rec = workflow.run(fed, s, run_out, sim_site="G", analysis_site="W", timeout=300)
                    ok, why = rec["data"]["verify"]["ok"], "" if rec["data"]["verify"]["ok"] else "steps lost or differ"
                except workflow.WorkflowFailed as e:
                    ok, why = False, str(e)
                outcomes.append({"run": i, "ok": ok, "seconds": round(time.monotonic() - t0, 2), "failure": why})
                print(f"soak: run {i}/{args.runs}: {'ok' if ok else 'FAILED: ' + why[:200]} "
                      f"({outcomes[-1]['seconds']} s)", flush=True)
                shutil.rmtree(run_out, ignore_errors=True)
        finally:
            core.down(fed.name)
    failed = [o for o in outcomes if not o["ok"]]
    summary = {"federation": base.name, "L": args.L, "steps": args.steps, "seed_fix": not args.without_seed_fix,
               "runs": len(outcomes),
               "failed": len(failed), "outcomes": outcomes}
    name = "soak-without-fix.json" if args.without_seed_fix else "soak.json"
    (out / name).write_text(json.dumps(summary, indent=1))
    print(f"soak: {len(outcomes)} runs, {len(failed)} failed; {out / name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
