"""The federation's file systems: declared per site in the federation file, real
directories on the testbed, and the storage site's shared ones reached from the other
site through sshfs across the emulated link (every byte crosses it)."""

import json
import os
from pathlib import Path

import pytest

from conftest import needs_root, no_leftovers, run_geofed, two_site_federation
from geofed import federation
from geofed.errors import UserError
from geofed.testbed import core, storage

FILESYSTEMS = """
[[site.filesystem]]
name = "home"
shared = true
[[site.filesystem]]
name = "tmp"
"""


def fed_with_filesystems(write_fed, name="gfstore"):
    text = two_site_federation(name, rtt_ms=2.0)
    # site A declares its own; site B keeps the defaults (node-local scratch, shared data)
    head, sep, tail = text.partition("[[site]]\ncode = \"B\"")
    return federation.load(write_fed(head + FILESYSTEMS + sep + tail))


def test_sites_declare_file_systems_or_get_scratch_and_data(write_fed):
    fed = fed_with_filesystems(write_fed)
    assert [(f.name, f.shared) for f in fed.site("A").filesystems] == [("home", True), ("tmp", False)]
    assert [(f.name, f.shared) for f in fed.site("B").filesystems] == [("scratch", False), ("data", True)]


@pytest.mark.parametrize("fs,message", [
    ('[[site.filesystem]]\nname = "Home"\n', "site\\[0\\].filesystem\\[0\\].name: must be 1-32 lowercase"),
    ('[[site.filesystem]]\nname = "a"\n[[site.filesystem]]\nname = "a"\n', "a second file system named 'a'"),
    ('[[site.filesystem]]\nname = "a"\nshared = "yes"\n', "shared: must be true or false"),
    ('[[site.filesystem]]\nname = "a"\nsize = 3\n', "size"),
])
def test_bad_file_system_declarations_are_named(write_fed, fs, message):
    text = two_site_federation("gfbadfs", rtt_ms=2.0)
    head, sep, tail = text.partition("[[site]]\ncode = \"B\"")
    with pytest.raises(UserError, match=message):
        federation.load(write_fed(head + fs + sep + tail))


def test_a_node_reaches_its_own_sites_file_systems_on_disk_and_the_storage_sites_over_the_link(write_fed):
    fed = fed_with_filesystems(write_fed)
    root = storage.fed_root(fed.name)
    assert storage.resolve(fed, "A2", "tmp") == (root / "A" / "A2" / "tmp", False)
    assert storage.resolve(fed, "A1", "A:home") == (root / "A" / "home", False)
    assert storage.resolve(fed, "B1", "A:home") == (root / "mnt" / "B1" / "A-home", True)
    with pytest.raises(UserError, match="A:tmp is not exported to other sites; from B1 .*: A:home"):
        storage.resolve(fed, "B1", "A:tmp")
    with pytest.raises(UserError, match="file system 'A:nope': federation gfstore has A:home, A:tmp, B:scratch"):
        storage.resolve(fed, "B1", "A:nope")


@needs_root
@pytest.mark.root
def test_the_export_is_mounted_at_the_other_site_and_its_bytes_cross_the_link(write_fed):
    fed = fed_with_filesystems(write_fed, name=f"gfstore-{os.getpid()}")
    try:
        plan = core.up(fed)
        # `ops storage path` prints a directory that exists, also for a node's own site's
        # file system (it used to print it before anything had made it).
        res = run_geofed("ops", "storage", "path", str(fed.path), "A1", "A:home")
        assert res.returncode == 0, res.stderr
        assert Path(res.stdout.strip()) == storage.disk_path(fed, "A", "home") and Path(res.stdout.strip()).is_dir()
        state = storage.up(plan)
        mnt, remote = storage.resolve(fed, "B1", "A:home")
        assert remote and os.path.ismount(mnt)
        # The sshfs client lives in B1's network namespace: its traffic takes the link.
        sshfs = state["daemons"]["sshfs-B1-home"]["pid"]
        assert os.readlink(f"/proc/{sshfs}/ns/net") == f"net:[{os.stat('/run/netns/' + plan.node('B1').netns).st_ino}]"
        payload = os.urandom(4 << 20)
        before = core.link_tx_bytes(fed, "B", "A")
        (mnt / "written-at-B1").write_bytes(payload)
        crossed = core.link_tx_bytes(fed, "B", "A") - before
        # On A's disk, read without the mount: the same bytes, and at least as many crossed.
        assert (storage.disk_path(fed, "A", "home") / "written-at-B1").read_bytes() == payload
        assert crossed >= len(payload)
        # Node-local file systems are directories of their own per node.
        assert (storage.disk_path(fed, "A", "tmp", "A1")).is_dir() and storage.disk_path(fed, "A", "tmp", "A2").is_dir()
    finally:
        core.down(fed.name)
    assert no_leftovers(fed.name) == []
    assert not storage.fed_root(fed.name).exists() and not os.path.ismount(mnt)



@needs_root
@pytest.mark.root
def test_bench_remote_write_writes_across_the_link_beside_a_plain_copy_and_leaves_nothing(write_fed, tmp_path):
    fed = fed_with_filesystems(write_fed, name=f"gfrw-{os.getpid()}")
    try:
        core.up(fed)
        # The storage site's own node is not across the link: refused before anything is written.
        res = run_geofed("bench", "remote-write", "-f", str(fed.path), "--node", "A1", "--out", str(tmp_path))
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "local at A1" in res.stderr
        res = run_geofed("bench", "remote-write", "-f", str(fed.path), "--size", "8M", "--record", "1M",
                         "--repeat", "2", "--out", str(tmp_path))
        assert res.returncode == 0, res.stderr
        assert "write/copy" in res.stdout
        (path,) = tmp_path.glob("bench.remote_write-*.json")
        d = json.loads(path.read_text())["data"]
        # The defaults: the other site's login node writes into the storage site's first export.
        assert (d["node"], d["server"], d["filesystem"]) == ("B1", "A1", "A:home")
        assert len(d["rounds"]) == 2 and all(r["landed_bytes"] == 8 << 20 for r in d["rounds"])
        # Neither moved the bytes faster than the link's 1 Gb/s.
        assert all(0 < r["write_mb_s"] <= 125 and 0 < r["copy_mb_s"] <= 125 for r in d["rounds"])
        assert d["of_copy"] == d["write_mb_s"] / d["copy_mb_s"]
        assert list(storage.disk_path(fed, "A", "home").iterdir()) == []
    finally:
        core.down(fed.name)
    assert no_leftovers(fed.name) == []
