"""A third-party transfer: started from a node of site A, the bytes go from B to C over
their link alone, counted at each link emulator's interfaces."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from geofed import federation
from geofed.testbed import core, host, services, ssh
from tests.conftest import needs_root, no_leftovers, run_geofed

NAME = "xfer-3rd-test"
SIZE = 24 << 20
THREE_SITES = f"""
name = "{NAME}"
[local]
latency_us = 2.0
[[site]]
code = "A"
nodes = 1
[[site]]
code = "B"
nodes = 1
[[site]]
code = "C"
nodes = 1
""" + "".join(f'[[link]]\nsites = ["{x}", "{y}"]\nrtt_ms = 2.0\nbandwidth_gbps = 1.0\n'
              for x, y in (("A", "B"), ("A", "C"), ("B", "C")))


@pytest.fixture(scope="module")
def fed():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    top = Path(tempfile.mkdtemp(prefix="geofed-test-3rd-"))
    os.chmod(top, 0o755)  # the ends run as the testbed's user
    (top / "fed.toml").write_text(THREE_SITES)
    f = federation.load(top / "fed.toml")
    try:
        core.up(f)
        ssh.up(f)
        yield f
    finally:
        ssh.down(NAME)
        core.down(NAME)
        shutil.rmtree(top)
    assert no_leftovers(NAME) == []


def link_bytes(plan) -> dict[str, int]:
    """Bytes each link emulator received on its two interfaces (both ways), from the kernel's counters."""
    out = {}
    for l in plan.links:
        counts = host.run_in(l.netns, ["cat"] + [f"/sys/class/net/{dev}/statistics/rx_bytes"
                                                 for dev in (core.EMU_PORT_A, core.EMU_PORT_B)]).stdout.split()
        out[l.link.name] = sum(map(int, counts))
    return out


@needs_root
def test_a_transfer_started_from_a_third_site_goes_between_the_two_others_only(fed):
    plan = core.require_up(fed)
    user = services.user_name(NAME)
    top = fed.path.parent
    src, dst = top / "src.bin", top / "dst"
    src.write_bytes(os.urandom(SIZE))
    os.chmod(src, 0o644)
    dst.mkdir()
    shutil.chown(dst, user)
    before = link_bytes(plan)
    res = run_geofed("transfer", "-f", str(fed.path), f"B1:{src}", f"C1:{dst}", "--from", "A1",
                     "--out", str(top / "out"))
    assert res.returncode == 0, res.stderr
    after = link_bytes(plan)
    moved = {k: after[k] - before[k] for k in after}
    assert (dst / "src.bin").read_bytes() == src.read_bytes()
    assert (dst / "src.bin").stat().st_uid == (dst.stat().st_uid)  # written by the ssh user's end
    # the data crossed B-C; A's links carried the two ssh sessions only (keys, the ends' events)
    assert moved["B-C"] > SIZE, moved
    assert 0 < moved["A-B"] < SIZE / 100 and 0 < moved["A-C"] < SIZE / 100, moved
    rec = json.loads(next((top / "out").glob("*.json")).read_text())
    assert rec["data"]["started_from"] == "A1"
