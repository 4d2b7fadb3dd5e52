"""The emulator's physics on a real testbed: no message faster than the fibre, and the
link's own contribution (measured minus the floor) equal to the fibre's propagation.

The timing assertions carry the host's load in their message: on a host whose other
work takes the CPU, a miss reads as such, not as a broken link."""

import os

import pytest

from conftest import needs_root, no_leftovers
from geofed import federation
from geofed.bench import link
from geofed.testbed import core

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]
SLACK = 0.01  # no sample may be more than 1 % below the propagation delay: physics, on any host
# The link's contribution against the fibre: a sanity bound here. The 5 % accuracy is a
# benchmark's claim (`geofed bench link`, docs/testbed.md), measured on a quiet host with
# repeats; a test run beside the rest of the suite on 2 cores missed 5 % by a hair twice
# (+5.1 %, -6.8 %) and would make CI a lottery.
TOLERANCE = 0.15


def load() -> str:
    return "host load average %.2f %.2f %.2f (2 cores)" % os.getloadavg()


@pytest.mark.parametrize("rtt_ms", [0.145, 1.0, 9.0])
def test_no_message_is_faster_than_the_fibre_and_the_link_adds_exactly_it(rtt_ms, tmp_path):
    name = f"gfphys-{str(rtt_ms).replace('.', '')}-{os.getpid()}"[:32]
    path = tmp_path / "fed.toml"
    path.write_text(link.two_site_toml(rtt_ms, 1.0, name=name))
    fed = federation.load(path)
    try:
        plan = core.up(fed)
        a, b = plan.nodes
        row = link.rtt_row(fed, a, b, count=500)
    finally:
        core.down(name)
    assert no_leftovers(name) == []
    fibre = row["propagation_us"]
    for what in ("probe", "mpi"):
        m = row[what]
        assert m["min_one_way_us"] >= (1 - SLACK) * fibre, f"{what}: minimum {m['min_one_way_us']:.1f} us " \
            f"below the fibre's {fibre:.1f} us"
        error = m["contribution_us"] / fibre - 1
        # ... beyond what the measurement's own scatter explains: the spread of its blocks'
        # contributions (each a link block less the floor block just before it). On the
        # 145 us link a 1-byte MPI ping-pong's host share is half the fibre's: a full-suite
        # run under load 1.5 read +24 % there while the probe and the longer links held.
        blocks = m["block_contributions_us"]
        scatter = (max(blocks) - min(blocks)) / fibre
        assert abs(error) <= TOLERANCE + scatter, f"{what}: link contribution {m['contribution_us']:.1f} us " \
            f"(median {m['median_one_way_us']:.1f} - floor {m['floor_one_way_us']:.1f}) against the fibre's " \
            f"{fibre:.1f} us: {error:+.1%}, blocks {', '.join(f'{x:.1f}' for x in blocks)}; {load()}"
