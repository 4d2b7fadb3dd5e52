"""IMB's Exchange pattern as a workload of the registry: across a real emulated link,
its data check, and a bad request refused before anything starts."""

import os

import pytest

from conftest import needs_root, own_testbed, run_geofed, two_site_federation
from geofed import records
from geofed.workloads import exchange

NAME = f"gftest-exch-{os.getpid() % 100000}"


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    path = tmp_path_factory.mktemp("fed") / "two.toml"
    path.write_text(two_site_federation(NAME, rtt_ms=2))
    with own_testbed(path, NAME) as fed_path:
        yield fed_path


@needs_root
@pytest.mark.root
def test_exchange_across_the_link(fed, tmp_path):
    res = run_geofed("bench", "exchange", "-f", fed, "-p", "A2B1", "--sizes", "1,4K,64K", "--budget", "0.05",
                     "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "# IMB Exchange on A2B1 (3 ranks, ring inter-site)" in res.stdout
    (path,) = tmp_path.glob("workload.result-*.json")
    (rec,) = records.load_paths([str(path)])
    assert rec.data.workload == "exchange" and rec.data.placement == "A2B1"
    assert rec.data.verdict == {"ok": True, "why": "every byte of 3 sizes checked"} and rec.sanity().ok
    rows = rec.data.result["rows"]
    assert [r["size"] for r in rows] == [1, 4096, 65536] and all(r["wrong_bytes"] == 0 for r in rows)
    # Two edges of the ring A1-A2-B1 cross the 2 ms link: no exchange beats its one-way delay.
    assert all(r["t_max_us"] >= 0.95 * 1000 for r in rows), rows
    assert rec.data.figures["t_max_us@1"] == rows[0]["t_max_us"]


def test_a_bad_size_is_refused_before_the_job(tmp_path):
    res = run_geofed("bench", "exchange", "-p", "W1G1", "--sizes", "1:lots", "--out", str(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "--sizes: 'lots' is not a size" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_sanity_names_the_first_wrong_size():
    w = exchange.WORKLOAD
    data = {"workload": "exchange", "placement": "W1G1", "params": {}, "figures": {}, "verdict": {"ok": True, "why": ""},
            "result": {"ranks": [], "class": "inter-site",
                       "rows": [{"size": 1, "wrong_bytes": 0}, {"size": 64, "wrong_bytes": 3}]}}
    verdict = w.sanity(records.make("workload.result", data))
    assert not verdict.ok and verdict.why == "3 bytes arrived wrong at 64 B"
