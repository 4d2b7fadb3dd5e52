"""BT-I/O: NPB's multi-partitioning covers the grid once, simple and full write the same
file over real MPI-IO (the PyPI MPICH's ROMIO) and every double is read back in place,
and requests BT cannot serve are refused before anything starts."""

import os

import numpy as np
import pytest

from conftest import run_geofed
from geofed.bench import btio
from geofed.errors import UserError


@pytest.mark.parametrize("ranks,n", [(1, 12), (4, 12), (9, 12), (16, 24), (4, 13)])
def test_the_cells_of_all_ranks_tile_the_grid_once(ranks, n):
    seen = np.zeros((n, n, n), dtype=int)
    for r in range(ranks):
        mine = btio.cells(r, ranks, n)
        assert len(mine) == btio.isqrt_exact(ranks)
        # One cell in each z-slab: a rank's cells never share a plane.
        zs = [low[2] for low, _ in mine]
        assert len(set(zs)) == len(zs)
        for low, size in mine:
            seen[low[2]:low[2] + size[2], low[1]:low[1] + size[1], low[0]:low[0] + size[0]] += 1
    assert (seen == 1).all()


def test_every_double_of_a_dump_is_its_own_number():
    n = 12
    whole = np.concatenate([btio.values(n, 3, low, size).ravel() for low, size in btio.cells(0, 1, n)])
    assert len(np.unique(whole)) == n ** 3 * btio.COMPONENTS
    assert whole.min() == 3 * n ** 3 * btio.COMPONENTS  # dump 3 starts where dump 2 ended


@pytest.mark.parametrize("cls,ranks,message", [
    ("Q", 4, "--class 'Q': expected one of S, W, A, B, C"),
    ("S", 3, "3 ranks: BT-I/O needs a square number"),
    ("S", 169, "class S's grid of 12^3 has fewer than one plane per cell"),
])
def test_requests_bt_cannot_serve_are_refused(cls, ranks, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)").replace("^", r"\^")):
        btio.check_request(cls, ranks)


def test_bad_input_is_one_line_and_exit_2_and_leaves_nothing(tmp_path):
    res = run_geofed("bench", "btio", "-p", "W3", "--path", str(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "square number" in res.stderr
    res = run_geofed("bench", "btio", "-p", "W1", "--subtype", "simpel", "--path", str(tmp_path))
    assert res.returncode == 2 and "--subtype: unknown 'simpel'" in res.stderr
    res = run_geofed("bench", "btio", "-p", "W1", "--path", str(tmp_path / "nowhere"))
    assert res.returncode == 2 and "not a directory" in res.stderr
    assert os.listdir(tmp_path) == []


def test_simple_and_full_write_the_same_file_and_it_reads_back_in_place(tmp_path):
    import json
    import sys
    from pathlib import Path

    from conftest import run_group
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    digests = {}
    for sub in ("simple", "full"):
        target, out = tmp_path / f"{sub}.dat", tmp_path / f"{sub}.json"
        run = {"n": 13, "steps": 10, "subtype": sub, "file": str(target)}
        res = run_group([mpiexec, "-n", "4", sys.executable, "-m", "geofed.workloads", "btio", json.dumps(run),
                         str(out)], 300)
        assert res.returncode == 0, res.stdout + res.stderr
        data = json.loads(out.read_text())
        assert data["wrong_doubles"] == 0 and data["file_size_ok"] and data["dumps"] == 2
        assert target.stat().st_size == 2 * 13 ** 3 * 5 * 8
        digests[sub] = btio.file_digest(target)
        # Independently of the benchmark's own check: dump 1's point (x, y, z) component m.
        raw = np.fromfile(target, dtype=np.float64).reshape(2, 13, 13, 13, 5)
        assert raw[1, 7, 3, 11, 2] == btio.values(13, 1, (11, 3, 7), (1, 1, 1))[0, 0, 0, 2]
    assert digests["simple"] == digests["full"]


def test_the_report_splits_each_run_into_io_and_the_rest(tmp_path):
    from geofed import records, report
    run = {"subtype": "simple", "ranks": 4, "bytes": 4.2e6, "total_s": 2.0, "io_s": 1.2, "io_fraction": 0.6,
           "mb_per_s": 3.5, "mflops": 120.0, "wrong_doubles": 0, "file_size_ok": True}
    data = {"class": "S", "n": 12, "steps": 60, "placement": "W4", "ranks_per_node": 1, "path": "/x",
            "files_identical": True, "verified": True, "runs": [run, dict(run, subtype="full", io_s=0.4, io_fraction=0.2)]}
    page = report.render([records.make("bench.btio", data, federation="icm-task")], tmp_path).read_text()
    assert "<td>simple</td><td>4</td><td>4.2</td><td>2.00</td><td>1.20</td><td>60.0%</td>" in page
    assert (tmp_path / "btio.png").stat().st_size > 1000
