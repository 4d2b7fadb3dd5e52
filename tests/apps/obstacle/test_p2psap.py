"""The P2PSAP bindings over real loopback sockets: sessions, semantics, authentication."""

import time

import numpy as np
import pytest

geofed_p2psap = pytest.importorskip("geofed_p2psap")


@pytest.fixture
def pair():
    a = geofed_p2psap.Endpoint(0, 2, b"job-secret", "127.0.0.1")
    b = geofed_p2psap.Endpoint(1, 2, b"job-secret", "127.0.0.1")
    yield a, b
    a.close()
    b.close()


def test_table_one_from_python():
    assert geofed_p2psap.stack("async", "intra", "fabric") == ["TransportDriver", "Resize", "Asynchronous"]
    assert geofed_p2psap.stack("sync", "inter", "eth")[-1] == "TcpNewRenoCa"
    with pytest.raises(ValueError, match="scheme"):
        geofed_p2psap.stack("maybe", "intra", "eth")


@pytest.mark.parametrize("network", ["eth", "fabric"])
def test_sync_delivers_in_order_exactly_once_then_reconfigures_to_async(pair, network):
    a, b = pair
    a.connect(1, f"127.0.0.1:{b.port}", "sync", "inter", network)
    b.wait_peer(0, 10)
    msgs = [np.full(3000 + 97 * i, i % 251, dtype=np.uint8).tobytes() for i in range(300)]
    for m in msgs:
        a.send(1, 5, m)
    got = [b.receive(0, 5, 10) for _ in msgs]
    assert [n for n, _ in got] == list(range(1, 301))
    assert [d for _, d in got] == msgs
    assert b.receive(0, 5, 0.05) is None
    assert a.flush(1, 10)
    # Re-compose for the asynchronous scheme: a new session, newest value wins.
    old = a.stats(1)["session"]
    a.reconfigure(1, "async", "inter", network)
    b.wait_peer(0, 10)
    assert a.stats(1)["session"] != old
    assert "Asynchronous" in b.stats(0)["stack"]
    for i in range(50):
        a.send(1, 2, str(i).encode())
    assert b.wait(0, 2, 10)
    seen = []
    deadline = time.monotonic() + 30  # the newest message must arrive, but not forever
    while len(seen) == 0 or seen[-1] != 50:
        assert time.monotonic() < deadline, f"message 50 never arrived; saw {seen}"
        if b.wait(0, 2, 10):
            n, d = b.receive(0, 2)
            assert d == str(n - 1).encode()
            seen.append(n)
    assert seen == sorted(set(seen))
    assert b.receive(0, 2) is None  # non-blocking, nothing newer


def test_wrong_secret_is_rejected():
    good = geofed_p2psap.Endpoint(0, 2, b"right", "127.0.0.1")
    bad = geofed_p2psap.Endpoint(1, 2, b"wrong", "127.0.0.1")
    try:
        with pytest.raises(geofed_p2psap.AuthenticationError):
            good.connect(1, f"127.0.0.1:{bad.port}", "sync", "intra")
        with pytest.raises(geofed_p2psap.AuthenticationError):
            bad.connect(0, f"127.0.0.1:{good.port}", "sync", "intra")
        with pytest.raises(geofed_p2psap.UnknownPeerError):
            good.send(1, 0, b"x")
    finally:
        good.close()
        bad.close()


def test_unknown_peer_and_missing_secret():
    with pytest.raises(ValueError, match="secret"):
        geofed_p2psap.Endpoint(0, 2, b"", "127.0.0.1")
    a = geofed_p2psap.Endpoint(0, 2, b"k", "127.0.0.1")
    outsider = geofed_p2psap.Endpoint(0, 9, b"k", "127.0.0.1")
    try:
        with pytest.raises(geofed_p2psap.UnknownPeerError):
            a.connect(5, "127.0.0.1:1", "sync", "intra")
        # A peer id outside the job is refused by the server.
        with pytest.raises(geofed_p2psap.ProtocolError, match="unknown peer"):
            outsider.connect(0, f"127.0.0.1:{a.port}", "sync", "intra")
    finally:
        a.close()
        outsider.close()
