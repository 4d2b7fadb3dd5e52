"""`geofed bench io` on a file system of the testbed from one of its nodes (the way the demo
uses it), and the two ways of use refused when mixed; `tests/bench/test_io_bench.py` holds
the grid itself on a directory of this host."""

import json
import os

import pytest

from conftest import needs_root, own_testbed, run_geofed, two_site_federation
from geofed import federation
from geofed.testbed import storage

NAME = f"gftest-io-{os.getpid() % 100000}"


@pytest.mark.parametrize("args,fragment", [
    (["--node", "A1"], "--node A1: give --filesystem SITE:NAME too"),
    (["--filesystem", "W:data"], "--filesystem W:data: give --node"),
    (["--path", ".", "--filesystem", "W:data", "--node", "W1"], "--path and --filesystem: give one"),
    (["--filesystem", "W:nope", "--node", "W1"], "file system 'W:nope'"),
    (["--modes", "fast"], "--modes: unknown 'fast'"),
])
def test_mixed_or_unknown_ways_are_refused_in_one_line(args, fragment, tmp_path):
    res = run_geofed("bench", "io", *args, "--out", str(tmp_path))
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and fragment in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []


@needs_root
@pytest.mark.root
def test_a_file_system_across_the_link_from_a_node(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text(two_site_federation(NAME, rtt_ms=2))
    with own_testbed(path, NAME):
        res = run_geofed("bench", "io", "-f", str(path), "--filesystem", "A:data", "--node", "B1", "--sizes", "1M",
                         "--records", "256K,1M", "--modes", "buffered", "--ops", "write,read", "--repeat", "1",
                         "--out", str(tmp_path / "out"))
        assert res.returncode == 0, res.stderr
        assert "A:data from B1 (across the link)" in res.stderr
        (rec,) = (json.loads(p.read_text()) for p in (tmp_path / "out").glob("bench.io-*.json"))
        # Measured through B1's mount of A's export, and the record names the federation.
        mount, remote = storage.resolve(federation.load(path), "B1", "A:data")
        assert remote and rec["data"]["path"] == str(mount.resolve())
        assert rec["meta"]["federation"] == NAME
        assert {(c["record"], c["op"]) for c in rec["data"]["cells"]} == {
            (r, op) for r in (256 << 10, 1 << 20) for op in ("write", "read")}
        assert rec["data"]["verified_bytes"] == 2 << 20
        assert not [p for p in mount.iterdir() if p.name.startswith("geofed-io-")]
