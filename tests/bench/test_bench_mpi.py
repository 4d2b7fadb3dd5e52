"""The `mpi` workload's rank program with real MPI ranks on this host, under the one entry
point `python -m geofed.workloads` (no testbed, no root needed)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from geofed import records
from geofed.bench import compare, suite
from tests.conftest import run_ranks


def ranks(n: int, params: dict, result: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_ranks(n, [sys.executable, "-m", "geofed.workloads", "mpi", json.dumps(params), str(result)], timeout)


def test_p2p_prints_osu_text_and_sends_home_a_bench_mpi_result(tmp_path):
    result = tmp_path / "r.json"
    # OSU would run a million iterations; the 0.05 s budget per size must cut them.
    res = ranks(2, {"benchmarks": "latency,bw,bibw", "sizes": "1,4K,64K", "budget": 0.05, "iterations": 1000000},
                result)
    assert res.returncode == 0, res.stderr
    parsed = compare.parse_osu(res.stdout)
    assert sorted(parsed) == [1, 4096, 65536]  # the three tables share sizes; OSU's parser sees size -> value
    assert res.stdout.count("# Size") == 3 and "Latency (us)" in res.stdout and "Bandwidth (MB/s)" in res.stdout

    d = json.loads(result.read_text())
    assert records.make("bench.mpi", d).data.results == d["results"]  # rank 0's result fits its record kind
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
    result = tmp_path / "c.json"
    res = ranks(3, {"benchmarks": "coll", "sizes": "1,4,4K", "validate": True, "rotate_root": True, "budget": 0.05},
                result)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("Pass") == 3 + 3 + 2 + 2 and "Fail" not in res.stdout  # reductions start at 4 B
    d = json.loads(result.read_text())
    assert [r["benchmark"] for r in d["results"]] == ["bcast", "gather", "reduce", "allreduce"]
    for r in d["results"]:
        assert r["ranks"] == 3 and r["rotate_root"] is True
        for row in r["sizes"]:
            assert row["wrong"] == 0 and row["min_rank_us"] <= row["value"] <= row["max_rank_us"]


def test_p2p_validation_of_every_message(tmp_path):
    res = ranks(2, {"benchmarks": "latency,bw", "sizes": "1,64K", "validate": True, "budget": 0.05},
                tmp_path / "v.json")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("Pass") == 4


def test_one_rank_is_refused_in_one_line_and_nothing_comes_home(tmp_path):
    res = ranks(1, {"benchmarks": "latency"}, tmp_path / "one.json")
    assert res.returncode == 2
    assert "latency needs at least 2 ranks" in res.stderr and res.stderr.strip().count("\n") == 0
    assert not (tmp_path / "one.json").exists()
