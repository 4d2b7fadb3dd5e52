"""`geofed bench remote-write`: a sequential write into the storage site's file system across
the link, against a plain TCP copy of the same bytes between the same nodes.

The write is `bench io`'s pass (storage.c: every record once, the fsync inside the
time, as `dd conv=fsync`) into a file under the node's mount of the export: sshfs in
the node's namespace, sftp-server on the storage site's login node, so every byte
crosses the link. The copy is geofed-probe's TCP stream from the same node to the same
login node (its sink discards what it gets): what the network and the two nodes'
TCP carry without the file system. --repeat runs them in turn that many times, so both
see the same machine; medians, and the write's share of the copy.
"""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

from geofed.bench import storage as io
from geofed.errors import JobFailed, UserError
from geofed.records.storage import fmt_size

GENERATION = io.GENERATION["write"]


def check(fed, node: str, spec: str) -> Path:
    """The node's path of the file system, refused unless it is across the link."""
    from geofed.testbed import storage
    try:
        fed.node(node)
    except KeyError:
        raise UserError(f"--node {node}: federation {fed.name} has no such node") from None
    path, remote = storage.resolve(fed, node, spec)
    if not remote:
        raise UserError(f"--filesystem {spec}: local at {node}; a remote write needs a node of another site than "
                        f"the storage site {fed.storage}")
    return path


def run(plan, node: str, spec: str, size: int, record: int, repeat: int, progress=lambda m: None) -> dict:
    from geofed.testbed import probe, storage
    fed = plan.fed
    storage.up(plan, progress)
    path = check(fed, node, spec)
    server = fed.site(fed.storage).login_node.name
    directory = io.workdir(str(path))
    rounds = []
    try:
        io.check_space(directory, size)
        target = directory / "geofed-remote-write.bin"
        for r in range(1, repeat + 1):
            progress(f"round {r}/{repeat}: write {fmt_size(size)} into {spec} from {node}")
            seconds, _ = io.one_pass(target, "buffered", "write", size, record, GENERATION, seed=r)
            landed = (storage.disk_path(fed, fed.storage, spec.rpartition(":")[2]) / directory.name
                      / target.name).stat().st_size
            target.unlink()
            progress(f"round {r}/{repeat}: the same bytes over plain TCP {node} -> {server}")
            copy_mbps = probe.throughput_mbps(plan.node(node), plan.node(server), streams=1, nbytes=size)
            rounds.append({"write_mb_s": size / seconds / 1e6, "copy_mb_s": copy_mbps / 8,
                           "landed_bytes": landed})
    except OSError as e:  # the storage failed us (full, gone, an I/O error): one line, exit 1
        raise JobFailed(f"bench remote-write: {spec} from {node}: {e}") from None
    finally:  # the directory goes whatever happens: an error, Ctrl-C
        shutil.rmtree(directory, ignore_errors=True)
    write = statistics.median(r["write_mb_s"] for r in rounds)
    copy = statistics.median(r["copy_mb_s"] for r in rounds)
    return {"node": node, "server": server, "filesystem": spec, "path": str(path), "size": size, "record": record,
            "repeat": repeat, "link": {"rtt_ms": fed.rtt_ms(fed.node(node).site, fed.storage),
                                       "bandwidth_gbps": fed.bandwidth_gbps(fed.node(node).site, fed.storage)},
            "rounds": rounds, "write_mb_s": write, "copy_mb_s": copy, "of_copy": write / copy}


def format_table(d: dict) -> str:
    link_mb_s = d["link"]["bandwidth_gbps"] * 1000 / 8 if d["link"]["bandwidth_gbps"] else None
    lines = [f"{'round':>5} {'write MB/s':>10} {'copy MB/s':>9} {'write/copy':>10}"]
    for i, r in enumerate(d["rounds"], 1):
        lines.append(f"{i:>5} {r['write_mb_s']:>10.1f} {r['copy_mb_s']:>9.1f} {r['write_mb_s'] / r['copy_mb_s']:>10.1%}")
    lines.append(f"{'median':>5} {d['write_mb_s']:>10.1f} {d['copy_mb_s']:>9.1f} {d['of_copy']:>10.1%}")
    of_link = f" ({d['write_mb_s'] / link_mb_s:.1%} of the link's {link_mb_s:.1f} MB/s)" if link_mb_s else ""
    lines.append(f"{d['node']} -> {d['filesystem']} at {d['server']}: {fmt_size(d['size'])} in {fmt_size(d['record'])} "
                 f"records with fsync, through the mount{of_link}; copy: one TCP stream {d['node']} -> {d['server']}, "
                 f"the same bytes; RTT {d['link']['rtt_ms']:.4g} ms")
    return "\n".join(lines)
