"""The bulk-transfer program's steady-state figure (the transfer itself runs on the testbed)."""

from geofed.apps.obstacle.stream import intact, payload, steady_mbps


def test_steady_state_skips_the_first_quarter():
    size = 1 << 20
    # Slow start: the first 4 of 16 messages arrive 0.5 s apart, then one every 10 ms.
    arrived = [0.5 * i for i in range(4)] + [1.5 + 0.01 * (i + 1) for i in range(12)]
    assert abs(steady_mbps(arrived, size) - 11 * size * 8 / 0.11 / 1e6) < 1e-6


def test_steady_state_needs_an_interval_after_the_first_quarter():
    assert steady_mbps([0.0], 100) is None
    assert steady_mbps([0.0, 1.0, 1.0, 1.0], 100) is None  # all arrived in one read
    assert steady_mbps([0.0, 2.0], 100) == 100 * 8 / 2.0 / 1e6


def test_a_message_is_checked_against_its_index():
    data = payload(5, 4096)
    assert intact(data, 5, 4096)
    assert not intact(data, 6, 4096)
    assert not intact(data[:-8], 5, 4096)
    assert not intact(data[:100] + b"x" + data[101:], 5, 4096)
