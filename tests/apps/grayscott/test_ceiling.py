"""The plain-TCP ceiling of staging: a writer and two readers as real processes (on this
host's loopback here; in the nodes' namespaces under `bench grayscott`, test_workflow_testbed)."""

import json
import socket
import subprocess
import sys
import time

import pytest

from geofed.apps.grayscott import ceiling


def role(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    proc = subprocess.Popen([sys.executable, "-m", "geofed.apps.grayscott.ceiling", "--address", "127.0.0.1",
                             "--nbytes", "3000000", "--steps", "3", "--out", str(out), *args])
    return proc, out


def test_every_reader_gets_every_step_whole_after_its_publication(tmp_path):
    writer, wout = role(tmp_path, "writer", "--role", "writer", "--readers", "2", "--gap", "0.05",
                        "--start", str(time.time()))
    readers = [role(tmp_path, f"reader{i}", "--role", "reader") for i in range(2)]
    assert [p.wait(timeout=60) for p, _ in [(writer, wout), *readers]] == [0, 0, 0]
    published = json.loads(wout.read_text())
    got = [json.loads(out.read_text()) for _, out in readers]
    assert len(published) == 3 and published == sorted(published)
    for rows in got:
        assert [step for step, _, _ in rows] == [0, 1, 2]
        assert all(n == 3_000_000 for _, _, n in rows)
        assert all(arrived > published[step] for step, arrived, _ in rows)
    summary = ceiling.summarise(published, got)
    assert [s["step"] for s in summary["steps"]] == [0, 1, 2]
    # Both readers' bytes over the time until the later one had the step.
    first = summary["steps"][0]
    assert first["delivery_s"] == max(got[0][0][1], got[1][0][1]) - published[0]
    assert first["mbps"] == pytest.approx(2 * 3_000_000 * 8 / first["delivery_s"] / 1e6)


def test_a_writer_that_goes_away_fails_its_reader(tmp_path):
    reader, _ = role(tmp_path, "reader", "--role", "reader")
    # A writer that accepts the reader, announces a step and closes without sending it.
    with socket.create_server(("127.0.0.1", ceiling.PORT)) as srv:
        conn, _ = srv.accept()
        with conn:
            conn.sendall((0).to_bytes(4, "little"))
            assert conn.recv(1) == b"?"
            conn.sendall(b"x" * 1000)
    assert reader.wait(timeout=60) != 0
