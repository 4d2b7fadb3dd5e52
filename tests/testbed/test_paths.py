"""Three sites whose nodes are narrower than their fastest link (issue 31's case: a 5 Gb/s
local fabric and links of 10, 4 and 2 Gb/s): `testbed verify` holds every pair to its
path's narrowest hop and passes, and `bench matrix` meets the path model on every pair."""

import json
import os

import pytest

from conftest import needs_root, own_testbed, run_geofed
from geofed import federation
from geofed.testbed import live, probe, verify

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]
# Nothing beats the wire: MPI over TCP carries at most 95.6 % of the narrowest hop's rate
# (2 % for the measurement's scatter). Below it, this 2-core host shared with other
# testbeds (load 5-11) cost a pair up to 25 %; a model that took only the links (the
# 10 Gb/s link for nodes shaped to 5 Gb/s) is off by half.
ABOVE, BELOW = 0.02, 0.25


def three_sites(name: str) -> str:
    return federation.to_toml({
        "name": name, "testbed": {"cpu_per_core": 1.0}, "local": {"latency_us": 2.0, "bandwidth_gbps": 5},
        "site": [{"code": "M", "nodes": 2}, {"code": "S", "nodes": 1}, {"code": "T", "nodes": 1}],
        "link": [{"sites": ["M", "S"], "rtt_ms": 1, "bandwidth_gbps": 10},
                 {"sites": ["S", "T"], "rtt_ms": 2, "bandwidth_gbps": 4},
                 {"sites": ["M", "T"], "rtt_ms": 2, "bandwidth_gbps": 2}],
    })


def test_verify_and_the_matrix_meet_every_hop_of_each_path(tmp_path):
    name = f"gfpaths-{os.getpid()}"
    path = tmp_path / f"{name}.toml"
    path.write_text(three_sites(name))
    fed = federation.load(path)
    # The healthy 10 Gb/s link between nodes shaped to 5 Gb/s: the interfaces set the path.
    assert fed.bandwidth_gbps("M", "S") == 5 and fed.bandwidth_gbps("S", "T") == 4
    with own_testbed(path, name):
        res = run_geofed("testbed", "verify", str(path), "--count", "100",
                         "--out", str(tmp_path / "verify"))
        assert res.returncode == 0, res.stdout + res.stderr
        # A second of windows per pair: at the default 0.3 s, two or three windows, one
        # stall of this loaded host's cores costs a pair a quarter of its rate.
        res = run_geofed("bench", "matrix", "-f", str(path), "-p", "M2S1T1", "--budget", "1",
                         "--out", str(tmp_path / "matrix"))
        assert res.returncode == 0, res.stdout + res.stderr
    verified = json.loads(next((tmp_path / "verify").glob("testbed.verify-*.json")).read_text())["data"]
    assert {(p["src"], p["dst"]): p["throughput_mbps"]["configured"] for p in verified["pairs"]} == \
        {("M1", "M2"): 5000, ("M1", "S1"): 5000, ("M1", "T1"): 2000, ("S1", "T1"): 4000}
    [record] = (tmp_path / "matrix").glob("bench.matrix-*.json")
    pairs = json.loads(record.read_text())["data"]["pairs"]
    assert len(pairs) == 6
    off = {f"{p['a']}-{p['b']}": round(p["bw_MBps"] / p["model_bw_MBps"], 3) for p in pairs
           if not 1 - BELOW <= p["bw_MBps"] / p["model_bw_MBps"] <= 1 + ABOVE}
    assert off == {}, f"bandwidth off the path model (measured / model): {off}; " \
                      f"host load average {os.getloadavg()[0]:.2f} on 2 cores"


def test_nodes_shaped_below_a_super_frame_per_slack_still_hand_the_link_whole_super_frames(tmp_path):
    """ma-hd's nodes (2.6 Gb/s): their bucket held a 64 KiB GSO frame's bytes but not the
    headers of the wire frames it stands for, which tbf counts too, so tbf cut every
    super-frame and the link's emulator forwarded wire frames one by one (1.1 a frame,
    5 x the CPU per MB of icm-task's, until 2026-11-28)."""
    name = f"gfgso-{os.getpid()}"
    path = tmp_path / f"{name}.toml"
    path.write_text(federation.to_toml({
        "name": name, "testbed": {"cpu_per_core": 1.0}, "local": {"latency_us": 2.0, "bandwidth_gbps": 2.6},
        "site": [{"code": "M", "nodes": 1}, {"code": "H", "nodes": 1}],
        "link": [{"sites": ["M", "H"], "rtt_ms": 0.145, "bandwidth_gbps": 1.86}],
    }))
    fed = federation.load(path)
    [(src, dst, _)] = verify.pairs(fed)
    link = fed.links[0].name
    with own_testbed(path, name):
        before = live.counters(fed, link)["a_to_b"]
        probe.throughput_mbps(src, dst, streams=1, nbytes=32 << 20)
        after = live.counters(fed, link)["a_to_b"]
    frames, wire = after["sent"] - before["sent"], after["wire_out"] - before["wire_out"]
    assert wire > 20_000 and wire / frames > 10, f"{wire} wire frames in {frames} frames sent"
