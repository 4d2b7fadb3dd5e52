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
path), as two services of the testbed (testbed/services.py): "storage", the directories
on disk, and "storage-export", the sftp server, the sshfs clients and their mounts.
`geofed testbed down` unmounts and removes everything, data included: it is the
emulated federation's scratch.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from geofed.errors import UserError
from geofed.testbed import host, services
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


DISK, EXPORT = "storage", "storage-export"


def read_state(fed_name: str) -> dict | None:
    """The export's marker (its daemons and mounts); None when it is not up."""
    return services.read(fed_name, EXPORT)


def make_dirs(fed) -> None:
    """Every file system's directory (idempotent)."""
    for s in fed.sites:
        for fs in s.filesystems:
            for n in ([None] if fs.shared else [n.name for n in s.node_list()]):
                disk_path(fed, s.code, fs.name, n).mkdir(parents=True, exist_ok=True)


def up(plan: Plan, progress=lambda m: None) -> dict | None:
    """Directories, and the storage site's exports mounted at every node of the others;
    the export's marker (None when there is nothing to export or no one to mount it)."""
    fed = plan.fed
    services.up(fed.name, DISK, lambda svc: _register_disk(svc, fed))
    make_dirs(fed)
    exports = [f for f in fed.site(fed.storage).filesystems if f.shared]
    remote = [n for n in plan.nodes if n.node.site != fed.storage]
    if not exports or not remote:
        return None
    return services.up(fed.name, EXPORT, lambda svc: _start(plan, exports, remote, svc, progress))


def _register_disk(svc: services.Service, fed) -> None:
    if not ROOT.exists():
        svc.register("dirs", str(ROOT))
    svc.register("trees", str(fed_root(fed.name)))


def _start(plan: Plan, exports, remote, svc: services.Service, progress) -> None:
    fed = plan.fed
    server = plan.node(fed.site(fed.storage).login_node.name)
    progress(f"storage: sftp export of {', '.join(f'{fed.storage}:{f.name}' for f in exports)} on "
             f"{server.node.name}, mounted over the link at {', '.join(n.node.name for n in remote)}")
    # OpenSSH's sftp-server, one per connection, on a plain TCP port that only testbed
    # nodes may reach (socat's range=, as NFS exports by host): through ssh, its 2 MB
    # channel window capped a stream at 2 MB per 9 ms round trip (111 MB/s measured).
    svc.start(services.Daemon("sftp", host.in_netns_keep_mounts(server.netns, [
        "socat", f"TCP-LISTEN:{SFTP_PORT},bind={server.address},reuseaddr,fork,range={TESTBED_RANGE}",
        f"EXEC:{SFTP_SERVER} -d /,nofork"]), lambda: host.port_open(server.netns, server.address, SFTP_PORT),
        server.netns, START_TIMEOUT_S, grace_s=3.0))
    for n in remote:
        for fs in exports:
            mnt = mount_point(fed.name, n.node.name, fed.storage, fs.name)
            mnt.mkdir(parents=True, exist_ok=True)
            svc.register("mounts", str(mnt))
            svc.start(services.Daemon(f"sshfs-{n.node.name}-{fs.name}", host.in_netns_keep_mounts(n.netns, [
                "sshfs", "-f", f"{server.address}:{disk_path(fed, fed.storage, fs.name)}", str(mnt),
                "-o", f"directport={SFTP_PORT}", *SSHFS_OPTIONS]), lambda mnt=mnt: os.path.ismount(mnt),
                n.netns, START_TIMEOUT_S, grace_s=3.0))
            _read_ahead(mnt)


def _read_ahead(mnt: Path) -> None:
    """The kernel reads ahead 128 KiB on a FUSE mount: one such window per 9 ms round trip
    read 14 MB/s; 16 MiB keeps the link busier (60 MB/s measured)."""
    dev = subprocess.run(["mountpoint", "-d", str(mnt)], capture_output=True, text=True).stdout.strip()
    bdi = Path(f"/sys/class/bdi/{dev}/read_ahead_kb")
    if dev and bdi.exists():
        bdi.write_text(str(READ_AHEAD_KB))

