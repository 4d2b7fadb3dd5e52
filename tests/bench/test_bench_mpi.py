"""The rank program with real MPI ranks on this host (no testbed, no root needed)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from geofed.bench import compare, suite
from tests.conftest import run_group

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
REQUIRED = ("schema", "kind", "created", "geofed_version", "host", "meta", "data")


def ranks(n: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_group([MPIEXEC, "-n", str(n), sys.executable, "-m", "geofed.bench.mpi", *args], timeout)


def test_p2p_prints_osu_text_and_writes_the_record(tmp_path):
    rec_path = tmp_path / "r.json"
    # OSU would run a million iterations; the 0.05 s budget per size must cut them.
    res = ranks(2, "latency", "bw", "bibw", "--sizes", "1,4K,64K", "--budget", "0.05", "--iterations", "1000000",
                "--record", str(rec_path))
    assert res.returncode == 0, res.stderr
    parsed = compare.parse_osu(res.stdout)
    assert sorted(parsed) == [1, 4096, 65536]  # the three tables share sizes; OSU's parser sees size -> value
    assert res.stdout.count("# Size") == 3 and "Latency (us)" in res.stdout and "Bandwidth (MB/s)" in res.stdout

    rec = json.loads(rec_path.read_text())
    assert all(k in rec for k in REQUIRED) and rec["kind"] == "bench.mpi"
    d = rec["data"]
    assert {"placement", "mpi_library", "mpi_version", "ranks", "hosts", "sites", "budget_s", "started",
            "finished", "results"} <= set(d)
    assert "MPICH" in d["mpi_library"]
    assert [r["benchmark"] for r in d["results"]] == ["latency", "bw", "bibw"]
    for res_ in d["results"]:
        assert res_["class"] == "intra-node" and res_["model"] is None
        for row in res_["sizes"]:
            assert row["wrong"] == 0
            assert suite.MIN_ITERATIONS <= row["iterations"] < 1000000
            st = row["stats"]
            assert st["min"] <= st["p50"] <= st["p90"] <= st["p99"] and st["n"] == row["iterations"]
            # the budget held: first iteration, warm-ups (20 %) and timed ones, with room for a noisy host
            assert row["seconds"] < 0.05 * 10
    lat = d["results"][0]["sizes"][0]
    assert lat["value"] == pytest.approx(lat["stats"]["mean"])  # OSU's number: the mean of RTT/2


def test_collectives_validated_with_rotating_root(tmp_path):
    rec_path = tmp_path / "c.json"
    res = ranks(3, "coll", "--sizes", "1,4,4K", "--validate", "--rotate-root", "--budget", "0.05",
                "--record", str(rec_path))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("Pass") == 3 + 3 + 2 + 2 and "Fail" not in res.stdout  # reductions start at 4 B
    d = json.loads(rec_path.read_text())["data"]
    assert [r["benchmark"] for r in d["results"]] == ["bcast", "gather", "reduce", "allreduce"]
    for r in d["results"]:
        assert r["ranks"] == 3 and r["rotate_root"] is True
        for row in r["sizes"]:
            assert row["wrong"] == 0 and row["min_rank_us"] <= row["value"] <= row["max_rank_us"]


def test_p2p_validation_of_every_message():
    res = ranks(2, "latency", "bw", "--sizes", "1,64K", "--validate", "--budget", "0.05")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("Pass") == 4


def test_one_rank_is_refused():
    res = ranks(1, "latency")
    assert res.returncode == 2
    assert "latency needs at least 2 ranks" in res.stderr
