"""Many small files against one file of the same bytes, side by side on a private copy of
the federation (`geofed bench transfer-files`).

A tree of N files (FILES_PER_DIR to a directory, as data sets are laid out; sizes fixed
or drawn from a range) and one file holding as many bytes are made under a directory of
this command's own (geofed-files-*, removed at the end, also on failure), and moved with
`geofed transfer` from a node of the first site to a node of the second, alternating,
--repeat times each; every destination is compared with its source (find's listing:
path, type, size, mtime, mode) and removed before the next run. The rate is the bytes
over the whole run as its caller sees it (the ends started, the source walked, the plan
sent, every file written, named and given its metadata): what a user waits for. Where
the time goes: making the source here (the files' creation and writes, for scale),
walking it once as the sender does, and the transfer's phases as its sender times them:
the plan (connecting, walking the source while the plan streams out, the receiver's
answer), the data (first bundle sent to last acknowledged: files created, written, given
their metadata and named as they arrive), the finish (links, directories' metadata); the
rest of the run is the ends' start.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from geofed.errors import UserError
from geofed.progress import progress

FILES_PER_DIR = 1000
MTIME_NS = 1_577_934_245_000_000_000  # the tree's files all date from 2020-01-02: mtimes are kept


def file_sizes(text: str) -> tuple[int, int]:
    """SIZE, or MIN-MAX (each file's size drawn between them; MIN may be 0): 64K, 0-100."""
    from geofed import validate
    low, sep, high = text.partition("-")
    lo = 0 if sep and low.strip() == "0" else validate.parse_size(low, "--file-size")
    hi = validate.parse_size(high, "--file-size") if sep else lo
    if hi < lo:
        raise UserError(f"--file-size {text}: the largest size is below the smallest")
    return lo, hi


def make_tree(root: Path, files: int, sizes: tuple[int, int], seed: int = 1) -> int:
    """The tree of small files under root; its bytes. Random bytes (nothing compresses or
    deduplicates them), one block of them reused at shifting offsets so that making a
    million files is not a million calls for random numbers."""
    rng = random.Random(seed)
    block = rng.randbytes(max(sizes[1], 1) * 2)
    total = 0
    for d in range(0, files, FILES_PER_DIR):
        sub = root / f"d{d // FILES_PER_DIR:05d}"
        sub.mkdir(parents=True)
        for k in range(d, min(files, d + FILES_PER_DIR)):
            n = rng.randint(*sizes)
            path = sub / f"f{k:07d}.dat"
            with open(path, "wb") as f:
                f.write(block[k % (sizes[1] + 1):][:n])
            os.utime(path, ns=(MTIME_NS, MTIME_NS + k))
            total += n
    return total


def make_file(path: Path, nbytes: int) -> None:
    with open(path, "wb") as f:
        for left in range(nbytes, 0, -(1 << 24)):
            f.write(os.urandom(min(left, 1 << 24)))
    os.utime(path, ns=(MTIME_NS, MTIME_NS))


def listing(root: Path) -> list[str]:
    """find's view: path, type, size (not of a directory: on ext4 that is the blocks its
    entries took, which depends on the order they were made in), mtime, mode; the same at
    both ends means the tree arrived."""
    out = subprocess.run(["find", str(root), "-printf", r"%y %s %T@ %m %P\n"], capture_output=True, text=True,
                         check=True).stdout
    return sorted("d - " + line.split(" ", 2)[2] if line.startswith("d ") else line for line in out.splitlines())


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def check_space(where: Path, need: int, files: int) -> None:
    """Two sources and one destination at a time, and an inode for each file of two trees."""
    usage, inodes = shutil.disk_usage(where), os.statvfs(where).f_favail
    if need > usage.free * 0.9 or 2 * files > inodes * 0.9:
        raise UserError(f"--dir {where}: {need / 1e9:.1f} GB and {2 * files} inodes needed (two sources, one "
                        f"destination), {usage.free / 1e9:.1f} GB and {inodes} inodes free: fewer --files or "
                        f"another --dir")


def run(base, files: int, sizes: tuple[int, int], repeat: int, where: Path, streams: int | None) -> dict:
    from geofed.ops import transfer, xfer_ends
    from geofed.testbed import core
    mean = (sizes[0] + sizes[1]) // 2
    check_space(where, 3 * files * mean + (files * 4096 if sizes[1] < 4096 else 0), files)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="geofed-files-", dir=where)))
        progress(f"transfer-files: making {files} files of {sizes[0]}-{sizes[1]} bytes in {tmp}")
        t0 = time.perf_counter()
        nbytes = make_tree(tmp / "tree", files, sizes)
        make_s = time.perf_counter() - t0
        make_file(tmp / "one.bin", nbytes)
        t0 = time.perf_counter()
        walked = sum(1 for _ in xfer_ends.walk(str(tmp / "tree"), False, []))
        scan_s = time.perf_counter() - t0
        fed = stack.enter_context(core.owned_copy(base, "gffiles", progress))
        a, b = (next(n.name for n in fed.nodes() if n.site == s.code) for s in fed.sites[:2])
        runs = []
        for k in range(repeat):
            for what, src in (("files", tmp / "tree"), ("one file", tmp / "one.bin")):
                progress(f"transfer-files: {what}, run {k + 1}/{repeat}")
                dst = tmp / "dst"
                t0 = time.perf_counter()
                data = transfer.run(fed, f"{a}:{src}", f"{b}:{dst}", streams=streams)
                wall = time.perf_counter() - t0
                intact = listing(src) == listing(dst) if what == "files" else \
                    subprocess.run(["cmp", "-s", str(src), str(dst)]).returncode == 0
                remove(dst)
                runs.append({"what": what, "wall_s": wall, "plan_s": data["phases"]["plan_s"], "data_s": data["seconds"],
                             "finish_s": data["phases"]["finish_s"], "moved_bytes": data["moved_bytes"],
                             "rate_mbps": data["moved_bytes"] * 8 / wall / 1e6, "streams": data["streams"],
                             "chunk_bytes": data["chunk_bytes"], "intact": intact,
                             "sender_cpu_s_per_gb": data["sender_cpu_s_per_gb"],
                             "receiver_cpu_s_per_gb": data["receiver_cpu_s_per_gb"]})
    link = fed.links[0]
    rate = {w: statistics.median(r["rate_mbps"] for r in runs if r["what"] == w) for w in ("files", "one file")}
    return {"files": files, "file_size": list(sizes), "bytes": nbytes, "entries": walked, "where": str(where),
            "link": {"rtt_ms": link.rtt_ms, "bandwidth_gbps": link.bandwidth_gbps}, "make_s": make_s,
            "scan_s": scan_s, "runs": runs, "files_mbps": rate["files"], "one_file_mbps": rate["one file"],
            "files_over_one_file": rate["files"] / rate["one file"] if rate["one file"] else 0.0,
            "intact": all(r["intact"] for r in runs)}


def table(data: dict) -> str:
    lo, hi = data["file_size"]
    size = f"{lo} B" if lo == hi else f"{lo}-{hi} B"
    lines = [f"{data['files']} files of {size} ({data['bytes'] / 1e9:.3f} GB, {data['entries']} entries) against one "
             f"file of the same bytes, in {data['where']}; link {data['link']['rtt_ms']:.4g} ms, "
             f"{data['link']['bandwidth_gbps']:g} Gb/s",
             f"making the source here {data['make_s']:.1f} s; walking it once (the sender's scan) {data['scan_s']:.1f} s",
             f"{'what':<9} {'run s':>8} {'plan s':>8} {'data s':>8} {'finish s':>8} {'Mb/s':>7} {'files/s':>9} {'streams':>7} {'chunk KiB':>9} "
             f"{'CPU s/GB tx':>11} {'rx':>6} {'intact':>6}"]
    for r in data["runs"]:
        n = data["files"] if r["what"] == "files" else 1
        lines.append(f"{r['what']:<9} {r['wall_s']:>8.2f} {r['plan_s']:>8.2f} {r['data_s']:>8.2f} "
                     f"{r['finish_s']:>8.2f} {r['rate_mbps']:>7.0f} "
                     f"{n / r['wall_s']:>9.0f} {r['streams']:>7} {r['chunk_bytes'] >> 10:>9} "
                     f"{r['sender_cpu_s_per_gb']:>11.2f} {r['receiver_cpu_s_per_gb']:>6.2f} "
                     f"{'yes' if r['intact'] else 'NO':>6}")
    lines.append(f"files at {data['files_over_one_file']:.1%} of one file's rate (medians: {data['files_mbps']:.0f} and "
                 f"{data['one_file_mbps']:.0f} Mb/s)")
    return "\n".join(lines)
