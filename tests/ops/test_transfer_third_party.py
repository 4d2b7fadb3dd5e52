"""A third-party transfer: started from a node of site A, the bytes go from B to C over
their link alone, counted at each link emulator's interfaces."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from geofed.ops import xfer_ends
from geofed.testbed import core, host, services, ssh
from tests.conftest import GEOFED, needs_root, no_leftovers, readable_federation, run_geofed
from tests.ops.test_bulk_transfer import _ends, verified

NAME = "xfer-3rd-test"
SIZE = 24 << 20
# sites A, B and C of one node each, every pair joined by a 2 ms, 1 Gb/s link
THREE_SITES = f'name = "{NAME}"\n[local]\nlatency_us = 2.0\n' \
    + "".join(f'[[site]]\ncode = "{code}"\nnodes = 1\n' for code in "ABC") \
    + "".join(f'[[link]]\nsites = ["{x}", "{y}"]\nrtt_ms = 2.0\nbandwidth_gbps = 1.0\n' for x, y in ("AB", "AC", "BC"))


@pytest.fixture(scope="module")
def fed():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with readable_federation(THREE_SITES) as f:  # the ends run as the testbed's user
        try:
            core.up(f)
            ssh.up(f)
            yield f
        finally:
            ssh.down(NAME)
            core.down(NAME)
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


@needs_root
def test_ctrl_c_at_the_third_site_stops_both_ends_and_the_same_command_resumes(fed):
    """The ends started over ssh stop with their sessions: nothing is left at B or C."""
    user = services.user_name(NAME)
    top = fed.path.parent
    src, dst = top / "big.bin", top / "resumed"
    src.write_bytes(os.urandom(96 << 20))
    os.chmod(src, 0o644)
    dst.mkdir()
    shutil.chown(dst, user)
    argv = [GEOFED, "transfer", "-f", str(fed.path), f"B1:{src}", f"C1:{dst}", "--from", "A1", "--streams", "1",
            "--chunk-mb", "1", "--out", str(top / "out-resumed")]
    proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    manifest = Path(str(dst / "big.bin") + xfer_ends.MANIFEST)
    deadline = time.monotonic() + 60
    while len(verified(manifest)) < 5:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "run the same command again to resume" in err, err
    deadline = time.monotonic() + 20  # each end sees its session close
    while _ends(top):
        assert time.monotonic() < deadline, _ends(top)
        time.sleep(0.05)
    assert 0 < len(verified(manifest)) < 96
    res = run_geofed(*argv[1:])
    assert res.returncode == 0, res.stderr
    assert (dst / "big.bin").read_bytes() == src.read_bytes()
    rec = json.loads(next((top / "out-resumed").glob("*.json")).read_text())["data"]
    # only what was missing moved
    assert rec["held_bytes"] >= 5 << 20 and rec["moved_bytes"] == (96 << 20) - rec["held_bytes"]
