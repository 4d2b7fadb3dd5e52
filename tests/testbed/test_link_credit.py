"""A credit link on the testbed: MPI's bandwidth across ma-hd's 28.6 km, with the Longbow
licensed for 10 km that seed 001 found "not sufficient", is held to credits per round
trip, not to the link's rate, and the lossless link loses nothing on the way."""

import json
import os

import pytest

from conftest import needs_root, own_testbed, run_geofed
from geofed import federation
from geofed.testbed import services

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]
# The ceiling is physics: MPI over TCP gets its payload's share of it and no more (2 %
# for the measurement's own scatter). Below it, a loaded 2-core host costs a few %: the
# benchmark (docs/testbed.md) came within 3 %; a test beside the suite gets 15 %.
ABOVE, BELOW = 0.02, 0.15


def ma_hd_toml(name: str, extender: str) -> str:
    """ma-hd's link and fabric, scaled as ma-hd is, one node a site, with `extender`'s credits."""
    return federation.to_toml({
        "name": name, "testbed": {"cpu_per_core": 0.3}, "local": {"latency_us": 2.0, "bandwidth_gbps": 2.6},
        "site": [{"code": "M", "nodes": 1}, {"code": "H", "nodes": 1}],
        "link": [{"sites": ["M", "H"], "fibre_km": 28.6, "bandwidth_gbps": 1.86, "extender": extender}],
    })


def test_mpi_bandwidth_is_held_to_credits_per_round_trip(tmp_path):
    name = f"gfcredit-{os.getpid()}"
    path = tmp_path / f"{name}.toml"
    path.write_text(ma_hd_toml(name, "longbow-10km"))
    fed = federation.load(path)
    ceiling = fed.bandwidth_gbps("M", "H") * 1e9 / 8 * federation.TCP_PAYLOAD_PER_WIRE_BYTE / 1e6
    rate = fed.links[0].bandwidth_gbps * 1e9 / 8 * federation.TCP_PAYLOAD_PER_WIRE_BYTE / 1e6
    assert ceiling < 0.4 * rate, "10 km of credits over 28.6 km must be the bottleneck"
    with own_testbed(path, name):
        res = run_geofed("bench", "mpi", "bw", "-f", str(path), "-p", "M1H1", "--sizes", "4M",
                         "--out", str(tmp_path / "out"))
        assert res.returncode == 0, res.stderr
        emulator_log = (services.fed_dir(name) / "link-MH.log").read_text()
        assert "credit wait overflowed" not in emulator_log, "the lossless link dropped a frame"
    [record] = (tmp_path / "out").glob("bench.mpi-*.json")
    [size] = json.loads(record.read_text())["data"]["results"][0]["sizes"]
    got = size["value"]
    assert (1 - BELOW) * ceiling <= got <= (1 + ABOVE) * ceiling, \
        f"4 MiB MPI bandwidth {got:.1f} MB/s against the credit ceiling {ceiling:.1f} MB/s " \
        f"(rate {rate:.1f}); host load average {os.getloadavg()[0]:.2f} on 2 cores"
