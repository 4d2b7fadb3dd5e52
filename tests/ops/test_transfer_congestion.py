"""geofed transfer's congestion control: on a lossy link bbr, chosen from the link model or
from the loss the sender measures, checked against cubic on the same link and with ss in
the sender's node; on a clean link that cubic fills, cubic."""

import dataclasses
import os
import subprocess
import threading

import pytest

from geofed import federation
from geofed.model.network import route, stream_rate_Bps
from geofed.ops import transfer
from geofed.testbed import core, host
from tests.conftest import needs_root, no_leftovers, two_site_federation

NAME, CLEAN = "xfer-cc-test", "xfer-cc-clean"
LOSS = 0.03  # 4 ms: Mathis holds a cubic stream to 20 Mb/s, 8 of them to 160 of the 1000


def brought_up(path):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    f = federation.load(path)
    core.up(f)
    yield f
    core.down(f.name)
    assert no_leftovers(f.name) == []


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    base = tmp_path_factory.mktemp("fed") / "base.toml"
    base.write_text(two_site_federation("xfer-cc-base", rtt_ms=4.0, gbps=1.0))
    yield from brought_up(federation.derive(federation.load(base), base.parent, NAME, loss=LOSS))


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """9 ms and 500 Mb/s: one cubic stream fills it (474-480 Mb/s with iperf3, 0.956 of it the
    payload's share), though it loses frames to the link's queue in its first seconds."""
    path = tmp_path_factory.mktemp("fed") / "clean.toml"
    path.write_text(two_site_federation(CLEAN, rtt_ms=9.0, gbps=0.5))
    yield from brought_up(path)


def sender_congestion_seen_by_ss(plan, dst: str, done: threading.Event) -> set[str]:
    """The congestion control `ss -ti` shows on the sender node's connections to dst's
    address, read until the transfer ends."""
    seen = set()
    a1 = plan.node("A1")
    while not done.is_set():
        out = subprocess.run(host.in_netns(a1.netns, ["ss", "-tin", "state", "established", "dst",
                                                      plan.node(dst).address]),
                             capture_output=True, text=True, check=True).stdout
        seen |= {line.split()[0] for line in out.splitlines() if line.startswith(("\t", " "))}
    return seen


@needs_root
def test_a_lossy_link_gets_bbr_and_keeps_most_of_it(fed):
    plan = core.require_up(fed)
    done, result = threading.Event(), {}

    def move():
        try:
            result["bbr"] = transfer.run(fed, "A1:mem:200M", "B1:/dev/null")
        finally:
            done.set()
    mover = threading.Thread(target=move)
    mover.start()
    seen = sender_congestion_seen_by_ss(plan, "B1", done)
    mover.join()
    bbr = result["bbr"]
    assert bbr["congestion"]["algorithm"] == "bbr" and bbr["congestion"]["sockets"] == ["bbr"]
    assert "the link model's loss (0.03)" in bbr["congestion"]["reason"]
    assert seen == {"bbr"}, seen  # the kernel's own view of every connection to the receiver
    cubic = transfer.run(fed, "A1:mem:40M", "B1:/dev/null", congestion="cubic")
    assert cubic["congestion"]["sockets"] == ["cubic"] and cubic["streams"] == transfer.MAX_STREAMS
    mathis = stream_rate_Bps(route(fed, "A", "B"), transfer.MAX_STREAMS) * 8e-6
    assert bbr["rate_mbps"] > 2 * mathis and bbr["rate_mbps"] > 2 * cubic["rate_mbps"], \
        (bbr["rate_mbps"], cubic["rate_mbps"], mathis)
    assert bbr["congestion"]["retransmitted"] > LOSS / 2  # the link did lose: bbr kept going


@needs_root
def test_loss_the_model_does_not_know_is_measured_and_switches_to_bbr(fed):
    """The same testbed, with a model of the link that says it loses nothing: the streams
    start with cubic, the sender measures their retransmissions after slow start."""
    unaware = dataclasses.replace(fed, links=tuple(dataclasses.replace(l, loss=0.0) for l in fed.links))
    assert transfer.choose(unaware, "A", "B").congestion == "cubic"
    data = transfer.run(unaware, "A1:mem:200M", "B1:/dev/null")
    c = data["congestion"]
    assert c["probe"]["switched"] and c["probe"]["retransmitted"] > LOSS / 2, c
    assert c["algorithm"] == "bbr" and c["sockets"] == ["bbr"] and "switched to bbr" in c["reason"]


@needs_root
def test_on_a_clean_link_the_sender_measures_and_decides_by_what_it_measured(clean):
    """Long enough (300 MB at 500 Mb/s) for the sender to measure the streams after slow
    start. On a quiet host one cubic stream fills this link and stays cubic; on a loaded
    one it may lose frames to late timers and fall behind, and then bbr is the right call:
    what is checked is that the decision follows the measurement and the kernel ran it."""
    data = transfer.run(clean, "A1:mem:300M", "B1:/dev/null")
    c, probe = data["congestion"], data["congestion"]["probe"]
    assert c["asked"] == "auto" and transfer.choose(clean, "A", "B").congestion == "cubic"
    lossy_and_slow = probe["retransmitted"] > transfer.MIN_SWITCH_LOSS and \
        probe["rate_Bps"] < transfer.LOSS_BOUND_SHARE * 0.5e9 / 8
    assert probe["switched"] == lossy_and_slow, c
    assert c["algorithm"] == ("bbr" if lossy_and_slow else "cubic") and c["sockets"] == [c["algorithm"]], c
    # memory to /dev/null: no disk at either end, the link is the narrower part
    assert data["limit"]["narrower"] == "network", data["limit"]
