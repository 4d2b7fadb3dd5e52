"""`geofed demo`, the main job, end to end: every step ran, the report has a section
for each, and the testbed is gone afterwards."""

import json

import pytest

from conftest import needs_openmpi, needs_root, no_leftovers, run_geofed

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]

SECTIONS = ["Testbed verification", "MPI job across a placement", "Gray-Scott across sites", "MDFS across sites",
            "Obstacle problem", "High-Performance Linpack", "Bulk transfers between nodes",
            "Prediction: models against measurements", "Storage: IOzone", "BT-I/O"]


# The whole demo under MPICH; under Open MPI `--quick`, every step and check with MDFS on 3
# of its 7 placements (issue 32: the demo under Open MPI, the same verdicts): the MPI's own
# parts, its launch and every workload's ranks, are the same in both, the one-site runs the
# model calibrates from and the inter-site ones it predicts too.
@pytest.mark.parametrize("mpi_choice, quick", [("mpich", False), pytest.param("openmpi", True, marks=needs_openmpi)],
                         ids=["mpich", "openmpi-quick"])
def test_demo_runs_every_step_and_leaves_nothing(tmp_path, mpi_choice, quick, monkeypatch):
    monkeypatch.setenv("GEOFED_MPI", mpi_choice)  # under each MPI, the same steps and checks
    res = run_geofed("demo", "--out", str(tmp_path), *(["--quick"] if quick else []), timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    assert {json.loads(p.read_text())["meta"].get("mpi", mpi_choice) for p in tmp_path.glob("*.json")} == {mpi_choice}
    assert "[16/18] taking the testbed down" in res.stderr
    page = (tmp_path / "report.html").read_text()
    for title in SECTIONS:
        assert f"<h2>{title}" in page, title
    mdfs = next(json.loads(p.read_text())["data"] for p in tmp_path.glob("mdfs.sweep-*.json"))
    assert {r["placement"] for r in mdfs["rows"]} == ({"G1W0", "G0W1", "G1W1"} if quick else
                                                      {"G1W0", "G0W1", "G2W0", "G1W1", "G0W2", "G2W2", "G0W4"})
    kinds = {json.loads(p.read_text())["kind"] for p in tmp_path.glob("*.json")}
    assert {"testbed.verify", "job.pingpong", "workflow.grayscott", "mdfs.sweep", "bench.obstacle", "bench.hpl",
            "ops.transfer", "bench.mpi", "bench.model", "bench.io", "bench.btio"} <= kinds
    staged = next(json.loads(p.read_text())["data"] for p in tmp_path.glob("ops.transfer-*.json"))
    assert staged["moved_bytes"] == 300 << 20 and "identical on arrival" in res.stdout
    hpl = [json.loads(p.read_text())["data"] for p in tmp_path.glob("bench.hpl-*.json")]
    assert sorted(d["placement"] for d in hpl) == ["G1W1", "W1", "W2"] and all(d["passed"] for d in hpl)
    obstacle = next(json.loads(p.read_text())["data"] for p in tmp_path.glob("bench.obstacle-*.json"))
    rows = {r["placement"]: r for r in obstacle["solver"]}
    assert set(rows) == {"W2", "G1W1"} and rows["G1W1"]["across_link"]
    assert all(x["certified_residual"] <= obstacle["tol"] for r in rows.values() for s in ("sync", "async", "mpi")
               for x in r["runs"][s])
    # storage: one row local at W1, one across the link at G1; BT-I/O at G wrote to W's disk, verified
    io_paths = sorted(json.loads(p.read_text())["data"]["path"] for p in tmp_path.glob("bench.io-*.json"))
    assert len(io_paths) == 2 and any("/mnt/G1/" in p for p in io_paths)
    bt = next(json.loads(p.read_text())["data"] for p in tmp_path.glob("bench.btio-*.json"))
    assert bt["verified"] and bt["files_identical"] and "/mnt/G1/" in bt["path"]
    # the models saw the one-site runs only, and predicted every inter-site one
    model = next(json.loads(p.read_text())["data"] for p in tmp_path.glob("bench.model-*.json"))
    assert model["calibration"]["crossing_us"] >= 0 and model["calibration"]["sources"]
    assert {"mpi-latency", "mpi-bw", "mdfs", "obstacle", "hpl"} <= {r["workload"] for r in model["rows"]}
    assert all(len(set(r["placement"]) & set("GW")) == 2 for r in model["rows"])
    assert no_leftovers("icm-task") == []
