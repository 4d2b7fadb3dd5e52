"""`geofed demo`: the main job, end to end on the shipped icm-task federation.

Testbed up, verify it against the federation file, run an MPI job placed across
both sites (W2G1: rank 0 at W1 meets an intra-site and an inter-site peer), run a
short Gray-Scott workflow (simulation at G staged through SST to analysis and plots
at W, every step checksummed), seed 000's MDFS Table 1/2 on the scaled nodes (one run
per placement and split), seed 003's Table III analogue (the obstacle problem by
P2PSAP sync and async peers and by MPI Jacobi, inside a site and across the link),
Linpack on one node, two nodes in one site and across the link (seed 001), a file
staged from W to G with `geofed transfer` and checked on arrival, storage near and far (an
IOzone-style row on W's data file system from W1 and across the link from G1, and
BT-I/O class S at G writing to W's file system), MPI latency and
bandwidth inside W and across the link, take the testbed down again (also on
failure), predict every inter-site run from the one-site ones with the models
(SimGrid beside), and render the report. One rank per node: the scaled nodes have
one core each.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Callable

from geofed import federation, records, report
from geofed.errors import JobFailed
from geofed.launch import job as launch
from geofed.launch import runner
from geofed.launch.placement import parse
from geofed.testbed import core, verify

DEMO_FEDERATION = "icm-task"
DEMO_PLACEMENT = "W2G1"
# Small enough for a few seconds of simulation; 6 output steps give the report frames.
DEMO_GRAYSCOTT = {"L": 32, "steps": 60, "plotgap": 10}
# Seed 000's placements; one run each keeps the demo short (the sweep command repeats).
DEMO_MDFS_PLACEMENTS = ["G1W0", "G0W1", "G2W0", "G1W1", "G0W2", "G2W2", "G0W4"]
# Table III analogue, one run per cell: one site, then across the 9 ms link.
DEMO_OBSTACLE = {"placements": ["W2", "G1W1"], "n": 32, "tol": 1e-8}
# Seed 000 staged its data set from ICM to TASK across the link: a file of this size, W1 -> G1.
DEMO_TRANSFER_MB = 300
# Seed 001's comparison at its smallest: one node (the model's calibration), two nodes in
# one site, then across the link (about 1 s each).
DEMO_HPL = {"placements": ["W1", "W2", "G1W1"], "n": 2000}
# Seed 002's storage checks at their smallest: one IOzone-style row on W's shared file
# system, from W1 (local) and from G1 (across the link); BT-I/O class S at G into it.
DEMO_IO = {"size": 4 << 20, "records": [64 << 10, 1 << 20], "ops": ["write", "rewrite", "read", "reread"]}
DEMO_BTIO = {"placement": "G2", "ranks_per_node": 2, "class": "S"}
# The MPI curves the models need: inside a site (calibration) and across the link (their check).
DEMO_MPI = {"placements": ["W2", "W1G1"], "sizes": "1:1M", "budget": "0.2"}


def run(out: Path, progress: Callable[[str], None]) -> int:
    core.require_root("up (geofed demo)")
    fed = federation.load(DEMO_FEDERATION)
    out.mkdir(parents=True, exist_ok=True)
    progress(f"[1/12] bringing up testbed {fed.name}")
    plan = core.up(fed, progress, own=True)  # never someone else's: it is taken down at the end
    try:
        progress("[2/12] verifying the testbed against its federation file")
        data = verify.verify(fed, progress=progress)
        print(verify.format_table(data))
        records.save(records.make("testbed.verify", data, **records.federation_meta(fed)), out)
        progress(f"[3/12] MPI ping-pong across placement {DEMO_PLACEMENT}")
        job_ok = _pingpong(fed, out)
        progress("[4/12] Gray-Scott: simulation at G, SST staging across the link, analysis and plots at W")
        workflow_ok = _grayscott(fed, out, progress)
        progress("[5/12] MDFS 2D on the Madelon-like data across seed 000's placements")
        _mdfs(fed, out, progress)
        progress("[6/12] obstacle problem: P2PSAP sync and async peers and MPI Jacobi, in one site and across the link")
        _obstacle(fed, out, progress)
        progress(f"[7/12] Linpack (HPL) on {' and '.join(DEMO_HPL['placements'])}, N = {DEMO_HPL['n']}")
        hpl_ok = _hpl(fed, out)
        progress(f"[8/12] bulk transfer: a {DEMO_TRANSFER_MB} MB file staged from W1 to G1 (seed 000's data set)")
        transfer_ok = _transfer(fed, out)
        progress("[9/12] storage: W's data file system from W1 and across the link from G1; BT-I/O class S at G")
        storage_ok = _storage(plan, out, progress)
        progress(f"[10/12] MPI latency and bandwidth on {' and '.join(DEMO_MPI['placements'])}, for the models")
        mpi_ok = _mpi(fed, out)
    finally:
        progress("[11/12] taking the testbed down")
        core.down(fed.name)
    progress("[12/12] predicting every inter-site run from the one-site runs (SimGrid beside)")
    model_ok = _model(fed, out)
    page = report.render(records.load_dir(out), out, title=f"geofed demo: {fed.description}")
    print(f"report: {page}")
    if not data["ok"]:
        print("demo: the testbed did not meet its federation file (see the report)", file=sys.stderr)
    steps_ok = job_ok and workflow_ok and hpl_ok and transfer_ok and storage_ok and mpi_ok and model_ok
    return 0 if data["ok"] and steps_ok else 1


def _pingpong(fed, out: Path) -> bool:
    with tempfile.TemporaryDirectory(prefix="geofed-") as tmp:
        rec_path = Path(tmp) / "pingpong.json"
        j = launch.Job(fed, parse(DEMO_PLACEMENT, fed),
                       [sys.executable, "-m", "geofed.bench.pingpong", "--out", str(rec_path)], cpu_limit=False)
        try:
            runner.run(j, what="demo ping-pong", timeout=300, echo=True)
        except JobFailed as e:
            print(f"demo: {e}", file=sys.stderr)
            return False
        records.save(json.loads(rec_path.read_text()), out)
    return True


def _grayscott(fed, out: Path, progress: Callable[[str], None]) -> bool:
    from geofed.apps.grayscott import settings, workflow
    try:
        rec = workflow.run(fed, settings.from_dict(DEMO_GRAYSCOTT, "demo"), out, sim_site="G", analysis_site="W",
                           timeout=300, progress=progress)
    except workflow.WorkflowFailed as e:
        print(f"demo: the Gray-Scott workflow failed: {e}", file=sys.stderr)
        return False
    print(workflow.format_table(rec))
    records.save(rec, out)
    if not rec["data"]["verify"]["ok"]:
        print("demo: Gray-Scott steps were lost or corrupted (see the report)", file=sys.stderr)
    return rec["data"]["verify"]["ok"]


def _mdfs(fed, out: Path, progress: Callable[[str], None]) -> None:
    from geofed.apps.mdfs import data, sweep
    from geofed.apps.mdfs.core import Params
    rec = sweep.sweep(fed, DEMO_MDFS_PLACEMENTS, ["speed", "even"], 1, Params(discretizations=30),
                      data.madelon_like(), progress)
    print(sweep.format_table(rec))
    records.save(rec, out)


def _obstacle(fed, out: Path, progress: Callable[[str], None]) -> None:
    from geofed.apps.obstacle import bench
    d = DEMO_OBSTACLE
    data = {"n": d["n"], "tol": d["tol"], "repeat": 1, "link_rtt_ms": fed.links[0].rtt_ms,
            "solver": bench.solver_rows(fed, d["placements"], d["n"], d["tol"], 1, progress)}
    print(bench.format_table(data))
    records.save(records.make("bench.obstacle", data, **records.federation_meta(fed)), out)


def _hpl(fed, out: Path) -> bool:
    from geofed.apps.hpl import params, run
    ok = True
    for code in DEMO_HPL["placements"]:
        pl = parse(code, fed)
        p, q = params.grid(pl.node_count)
        try:
            data = run.run(fed, pl, params.Params((DEMO_HPL["n"],), 80, p, q), timeout=300)
        except JobFailed as e:
            print(f"demo: {e}", file=sys.stderr)
            return False
        print(run.format_table(data))
        records.save(records.make("bench.hpl", data, **records.federation_meta(fed)), out)
        ok = ok and data["passed"]
    return ok


def _storage(plan, out: Path, progress: Callable[[str], None]) -> bool:
    import shutil
    from geofed.bench import btio
    from geofed.bench import storage as io
    from geofed.testbed import storage
    fed = plan.fed
    storage.up(plan, progress)
    spec = f"{fed.storage}:data"
    for node in ("W1", "G1"):
        path, remote = storage.resolve(fed, node, spec)
        progress(f"bench io: {spec} from {node} ({'across the link' if remote else 'local'})")
        directory = io.workdir(str(path))
        try:
            data = io.run(directory, [DEMO_IO["size"]], DEMO_IO["records"], ["buffered"], DEMO_IO["ops"], 1, 120,
                          [], True, progress)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        print(io.format_table(data))
        records.save(records.make("bench.io", data, **records.federation_meta(fed)), out)
    b = DEMO_BTIO
    mount, _ = storage.resolve(fed, "G1", spec)
    try:
        data = btio.run(fed, parse(b["placement"], fed), b["class"], ["simple", "full"], mount,
                        ranks_per_node=b["ranks_per_node"], timeout=300)
    except JobFailed as e:
        print(f"demo: {e}", file=sys.stderr)
        return False
    print(btio.format_table(data))
    records.save(records.make("bench.btio", data, **records.federation_meta(fed)), out)
    return data["verified"] and data["files_identical"]


def _mpi(fed, out: Path) -> bool:
    from geofed.bench import jobs
    for code in DEMO_MPI["placements"]:
        argv = ["geofed.bench.mpi", "latency", "bw", "--sizes", DEMO_MPI["sizes"], "--budget", DEMO_MPI["budget"]]
        try:
            rec = jobs.run_program(fed, parse(code, fed), argv, what=f"demo MPI on {code}", timeout=300)
        except JobFailed as e:
            print(f"demo: {e}", file=sys.stderr)
            return False
        records.save(rec, out)
        if rec["data"]["exit_status"] != 0:
            return False
    return True


def _model(fed, out: Path) -> bool:
    """Calibrated from this demo's one-site records only; its inter-site records are the check."""
    from geofed.errors import UserError
    from geofed.model import calibration, validate
    try:
        recs = records.load_paths([str(out)])
        data = validate.check(fed, calibration.fit(fed, recs), recs)
    except UserError as e:
        print(f"demo: models: {e}", file=sys.stderr)
        return False
    print(validate.format_table(data))
    records.save(records.make("bench.model", data, **records.federation_meta(fed)), out)
    return True


def _transfer(fed, out: Path) -> bool:
    import hashlib
    import os
    from geofed.ops import transfer
    with tempfile.TemporaryDirectory(prefix="geofed-demo-") as tmp:
        src, dst = Path(tmp) / "dataset.bin", Path(tmp) / "staged.bin"
        with open(src, "wb") as f:
            for _ in range(DEMO_TRANSFER_MB):
                f.write(os.urandom(1 << 20))
        try:
            data = transfer.run(fed, f"W1:{src}", f"G1:{dst}")
        except JobFailed as e:
            print(f"demo: {e}", file=sys.stderr)
            return False
        same = hashlib.sha256(dst.read_bytes()).digest() == hashlib.sha256(src.read_bytes()).digest()
    cap = data["link"]["bandwidth_gbps"] * 1000
    print(f"transfer W1 -> G1: {data['moved_bytes'] / 1e6:.0f} MB in {data['seconds']:.2f} s, {data['rate_mbps']:.0f} "
          f"of {cap:.0f} Mb/s ({data['rate_mbps'] / cap:.0%}) over {data['streams']} streams; "
          f"{'identical on arrival' if same else 'DIFFERENT on arrival'}")
    records.save(records.make("ops.transfer", data, **records.federation_meta(fed)), out)
    return same
