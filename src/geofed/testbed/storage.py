"""The federation's file systems on the testbed: real directories, and the storage
site's shared ones reached from the other sites across the emulated link.

Every file system lives under /var/lib/geofed/<federation>/ (the host's disk, not
memory): a shared one at <site>/<name>, seen by every node of its site; a node-local
one at <site>/<node>/<name>. The other sites reach the storage site's shared file
systems through sshfs (FUSE; this kernel has FUSE but no NFS client) against OpenSSH's
sftp-server on the storage site's login node, and one sshfs mount per remote node, its
process in that node's network namespace, so every byte pays the link's latency and
bandwidth, as seed 000's Gdansk nodes did reading ICM's NFS.
The mounts appear at mnt/<node>/<site>-<name>. Why sshfs, not NFS-Ganesha or GlusterFS:
docs/storage.md.

Started when first needed (`geofed ops storage up`, or a benchmark asking for a remote
path); `geofed testbed down` unmounts and removes everything, data included: it is
the emulated federation's scratch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from geofed.errors import UserError
from geofed.testbed import host
from geofed.testbed.plan import Plan

ROOT = Path("/var/lib/geofed")
SFTP_PORT = 2049
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
TESTBED_RANGE = "198.18.0.0/15"  # every testbed address (plan.py); nothing else reaches a node's namespace
READ_AHEAD_KB = 16384
START_TIMEOUT_S = 30.0
# SFTP requests of 64 KiB, sshfs's largest (its default 32 KiB): half the requests for
# sftp-server and sshfs to handle; a cold 1 GiB read across 9 ms went from 135-163 to
# 204-217 MB/s, writes stayed CPU-bound at 250-300 MB/s (docs/filesystems.md).
SSHFS_OPTIONS = ["-o", "max_conns=4", "-o", "reconnect", "-o", "max_write=65536", "-o", "max_read=65536"]


def fed_root(fed_name: str) -> Path:
    return ROOT / fed_name


def disk_path(fed, site: str, name: str, node: str | None = None) -> Path:
    """Where a file system's files are on this host's disk."""
    fs = fed.site(site).filesystem(name)
    return fed_root(fed.name) / site / name if fs.shared else fed_root(fed.name) / site / node / name


def mount_point(fed_name: str, node: str, site: str, name: str) -> Path:
    return fed_root(fed_name) / "mnt" / node / f"{site}-{name}"


def resolve(fed, node: str, spec: str) -> tuple[Path, bool]:
    """The path at which `node` reaches file system `spec` ("SITE:NAME", or "NAME" at the
    node's own site), and whether that is across the link."""
    site, _, name = spec.rpartition(":")
    here = fed.node(node).site
    site = site or here
    try:
        fs = fed.site(site).filesystem(name)
    except KeyError:
        known = ", ".join(f"{s.code}:{f.name}" for s in fed.sites for f in s.filesystems)
        raise UserError(f"file system {spec!r}: federation {fed.name} has {known}") from None
    if site == here:
        return disk_path(fed, site, name, node), False
    if not fs.shared or site != fed.storage:
        exported = ", ".join(f"{fed.storage}:{f.name}" for f in fed.site(fed.storage).filesystems if f.shared)
        raise UserError(f"file system {site}:{name} is not exported to other sites; from {node} the storage site's "
                        f"shared ones are: {exported or 'none'}")
    return mount_point(fed.name, node, site, name), True


def _state(fed_name: str) -> Path:
    return fed_root(fed_name) / "state.json"


def read_state(fed_name: str) -> dict:
    return host.read_json(_state(fed_name)) or {"pids": {}, "mounts": []}


def _write(fed_name: str, state: dict) -> None:
    host.write_json(_state(fed_name), state)


def make_dirs(fed) -> None:
    """Every file system's directory (idempotent)."""
    for s in fed.sites:
        for fs in s.filesystems:
            for n in ([None] if fs.shared else [n.name for n in s.node_list()]):
                disk_path(fed, s.code, fs.name, n).mkdir(parents=True, exist_ok=True)


def up(plan: Plan, progress=lambda m: None) -> dict:
    """Directories, and the storage site's exports mounted at every node of the others."""
    fed = plan.fed
    make_dirs(fed)
    state = read_state(fed.name)
    exports = [f for f in fed.site(fed.storage).filesystems if f.shared]
    remote = [n for n in plan.nodes if n.node.site != fed.storage]
    if not exports or not remote:
        return state
    if state.get("complete") and all(host.alive(p) for p in state["pids"].values()):
        return state
    down_network(fed.name)
    state = {"pids": {}, "mounts": [], "complete": False}
    _write(fed.name, state)
    try:
        _start(plan, exports, remote, state, progress)
    except BaseException:
        down_network(fed.name)
        raise
    return state


def _start(plan: Plan, exports, remote, state: dict, progress) -> None:
    fed = plan.fed
    d = fed_root(fed.name) / "sftp"
    d.mkdir(parents=True, exist_ok=True)
    server = plan.node(fed.site(fed.storage).login_node.name)
    progress(f"storage: sftp export of {', '.join(f'{fed.storage}:{f.name}' for f in exports)} on "
             f"{server.node.name}, mounted over the link at {', '.join(n.node.name for n in remote)}")
    # OpenSSH's sftp-server, one per connection, on a plain TCP port that only testbed
    # nodes may reach (socat's range=, as NFS exports by host): through ssh, its 2 MB
    # channel window capped a stream at 2 MB per 9 ms round trip (111 MB/s measured).
    _spawn(fed.name, state, "sftp", host.in_netns_keep_mounts(server.netns, [
        "socat", f"TCP-LISTEN:{SFTP_PORT},bind={server.address},reuseaddr,fork,range={TESTBED_RANGE}",
        f"EXEC:{SFTP_SERVER} -d /,nofork"]), d / "sftp.log")
    _wait(lambda: host.port_open(server.netns, server.address, SFTP_PORT), state["pids"]["sftp"], d / "sftp.log", "the sftp server")
    for n in remote:
        for fs in exports:
            mnt = mount_point(fed.name, n.node.name, fed.storage, fs.name)
            mnt.mkdir(parents=True, exist_ok=True)
            key = f"sshfs-{n.node.name}-{fs.name}"
            argv = host.in_netns_keep_mounts(n.netns, [
                "sshfs", "-f", f"{server.address}:{disk_path(fed, fed.storage, fs.name)}", str(mnt),
                "-o", f"directport={SFTP_PORT}", *SSHFS_OPTIONS])
            state["mounts"].append(str(mnt))
            _spawn(fed.name, state, key, argv, d / f"{key}.log")
            _wait(lambda mnt=mnt: os.path.ismount(mnt), state["pids"][key], d / f"{key}.log", key)
            _read_ahead(mnt)
    state["complete"] = True
    _write(fed.name, state)


def _read_ahead(mnt: Path) -> None:
    """The kernel reads ahead 128 KiB on a FUSE mount: one such window per 9 ms round trip
    read 14 MB/s; 16 MiB keeps the link busier (60 MB/s measured)."""
    dev = subprocess.run(["mountpoint", "-d", str(mnt)], capture_output=True, text=True).stdout.strip()
    bdi = Path(f"/sys/class/bdi/{dev}/read_ahead_kb")
    if dev and bdi.exists():
        bdi.write_text(str(READ_AHEAD_KB))


def _spawn(fed_name: str, state: dict, key: str, argv: list[str], log_path: Path) -> None:
    with host.interrupt_after(), open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        state["pids"][key] = proc.pid
        _write(fed_name, state)


def _wait(ready, pid: int, log_path: Path, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if not host.alive(pid) or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-2:]
            raise host.HostError(f"storage: {what} did not start: {' | '.join(tail) or 'no output'}")
        time.sleep(0.05)  # polling a condition with a deadline


def down_network(fed_name: str) -> list[str]:
    """Unmount the remote file systems and stop their sshfs and sshd."""
    state = read_state(fed_name)
    removed = []
    mnt_root = fed_root(fed_name) / "mnt"
    mounts = set(state.get("mounts", []))
    if mnt_root.is_dir():
        mounts |= {str(p) for node in mnt_root.iterdir() for p in node.iterdir()}
    for m in sorted(mounts):
        if os.path.ismount(m):
            # Lazy: a process still inside (a benchmark being stopped) does not keep it.
            subprocess.run(["umount", "-l", m], capture_output=True)
            removed.append(f"mount {m}")
    pids = [p for p in state.get("pids", {}).values() if host.alive(p)]
    host.terminate(pids, grace=3.0, groups=True)
    if pids:
        removed.append(f"{len(pids)} storage servers")
    if fed_root(fed_name).is_dir():
        state.update(pids={}, mounts=[], complete=False)
        _write(fed_name, state)
    return removed


def down(fed_name: str) -> list[str]:
    """Everything: the mounts, the servers, the directories and their data."""
    removed = down_network(fed_name)
    if fed_root(fed_name).exists():
        shutil.rmtree(fed_root(fed_name), ignore_errors=True)
        removed.append(str(fed_root(fed_name)))
    try:
        ROOT.rmdir()
    except OSError:
        pass
    return removed
