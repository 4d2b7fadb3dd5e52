"""`geofed predict mdfs -f icm-task -p G2W2` right after `geofed demo`, with no calibration
file: the models are calibrated on first use from the one-site runs the demo wrote to
geofed-out/demo; without them, the error names the command to run.

The records are made as the demo's steps write them (MPI latency and bandwidth on W2,
MDFS across seed 000's placements), not by running the demo."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
from record_samples import SAMPLES, sample

from conftest import GEOFED
from geofed import federation, records

ICM = federation.load("icm-task")
TUPLE_US = {"W": 0.5, "G": 0.55}


def _sweep_row(placement: str, site: str, nodes: int) -> dict:
    row = copy.deepcopy(SAMPLES["mdfs.sweep"]["rows"][0])
    tuples = 1_000_000 // nodes
    count_s = tuples * TUPLE_US[site] / 1e6
    return row | {"placement": placement, "nodes": nodes, "sites": [site], "compute_s": count_s + 0.05,
                  "compute_samples": [count_s + 0.05], "staging_s": 0.02 * nodes, "staging_samples": [0.02 * nodes],
                  "shares": [{"node": f"{site}{i + 1}", "tuples": tuples, "count_s": count_s} for i in range(nodes)]}


def demo_records(out: Path, fed=ICM) -> None:
    """What the demo's one-site steps leave in its directory, and one run across the link."""
    meta = records.federation_meta(fed)
    one_way = [{"size": s, "value": 20 + s / 200, "stats": {"p50": 20 + s / 200}} for s in (1, 1024, 65536, 1 << 20)]
    rate = [{"size": s, "value": min(s / 10, 200.0)} for s in (1, 1024, 65536, 1 << 20)]
    results = [{"benchmark": "latency", "class": "intra-site", "sizes": one_way},
               {"benchmark": "bw", "class": "intra-site", "sizes": rate}]
    records.save(records.make("bench.mpi", sample("bench.mpi", placement="W2", sites=["W"], results=results),
                              **meta), out)
    rows = [_sweep_row("G1W0", "G", 1), _sweep_row("G0W1", "W", 1), _sweep_row("G2W0", "G", 2),
            _sweep_row("G0W2", "W", 2), SAMPLES["mdfs.sweep"]["rows"][1]]
    records.save(records.make("mdfs.sweep", sample("mdfs.sweep", rows=rows), **meta), out)


def predict(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([GEOFED, "predict", "mdfs", "-f", "icm-task", "-p", "G2W2", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_predict_after_the_demo_calibrates_from_its_records(tmp_path):
    missing = predict(tmp_path)
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1, missing.stderr
    assert "run `geofed demo`, which measures them there, or `geofed model calibrate -f icm-task DIR`" \
        in missing.stderr
    demo_records(tmp_path / "geofed-out" / "demo")
    done = predict(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("mdfs on G2W2 (icm-task): ") and " ms predicted" in done.stdout
    assert "note: calibrated from the 2 one-site record(s) of icm-task in geofed-out/demo" in done.stdout
    pred = json.loads(predict(tmp_path, "--json").stdout)
    # four nodes share the tuples by speed (G 0.92, W 1); the slowest share sets the time
    shares = {s: 1_000_000 * speed / (2 * 0.92 + 2 * 1.0) for s, speed in (("G", 0.92), ("W", 1.0))}
    assert pred["parts"]["compute"] == pytest.approx(max(0.05 + shares[s] * TUPLE_US[s] / 1e6 for s in shares))
    assert pred["parts"]["link_comm"] > 0
    assert not (tmp_path / "icm-task.calibration.toml").exists()  # read, not written behind the user's back


def test_records_of_another_federation_file_are_not_used(tmp_path, write_fed):
    other = federation.load(write_fed(ICM.path.read_text().replace("fibre_km = 900", "fibre_km = 901")))
    demo_records(tmp_path / "geofed-out" / "demo", fed=other)  # same name, another file
    done = predict(tmp_path)
    assert done.returncode == 2 and "no one-site records of it in geofed-out/demo" in done.stderr
