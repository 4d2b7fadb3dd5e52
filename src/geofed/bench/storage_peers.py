"""IOzone and fio on the same file, size, record and mode as a `geofed bench io` cell.

IOzone (Debian's iozone3, which ./setup.sh unpacks into the venv) runs in phases on one
file (-w keeps it between them): `iozone -w -s SIZE -r RECORD -f FILE` with -o for O_SYNC
and -I for O_DIRECT, and -e -i 0 (write, rewrite; -e puts the fsync inside a write's time
as geofed does), then -i 1 -i 2 (read, reread, random read; after the same posix_fadvise
drop geofed makes) and -e -i 2 (random write), each only when asked for. Its rates are
kB/s (1024 B) from its text table.

Two differences remain by design: IOzone reads a file's first record before its clock
starts, so where the file is not in memory as a read or reread pass begins (after a
drop; on sshfs, at every open) that pass is partly served from memory (the record and
the read-ahead it starts: all of a small file; storage.iozone_prereads); and its random
operations are lseek + read/write, one more system call per record than geofed's and
fio's pread/pwrite.

fio runs one job per operation in IOzone's order, each after the last (stonewall), with
psync (pwrite/pread, as geofed), no preallocation (fallocate=none: a new file's blocks
are allocated as it is written, as by IOzone and geofed), an fsync at the end of each
write job (inside its runtime) and --direct=1 / --sync=1 for the modes; `read` invalidates
the file's cached pages first when they are to be dropped, the other jobs do not. fio
keeps its runtime in whole milliseconds: its write rates are bytes over that runtime
(which holds the fsync) and are marked coarse under 10 ms; its read rates are bytes over
the sum of its reads' latencies (nanoseconds).
"""

from __future__ import annotations

import json
import re
import subprocess
from functools import cache
from pathlib import Path

from geofed import native
from geofed.bench.iolib import drop_cache, resident
from geofed.errors import JobFailed, UserError

PEERS = ("iozone", "fio")
# Column names of IOzone's result table, left to right.
IOZONE_COLUMNS = ("kB", "reclen", "write", "rewrite", "read", "reread", "randread", "randwrite", "bkwdread",
                  "recrewrite", "strideread", "fwrite", "frewrite", "fread", "freread")
FIO_RW = {"write": "write", "rewrite": "write", "read": "read", "reread": "read", "randread": "randread",
          "randwrite": "randwrite"}
FIO_COARSE_MS = 10
TIMEOUT_S = 3600


IOZONE_MAX_RECORD = 16 << 20  # its buffer's size


def binary(peer: str) -> str:
    return native.binary(peer, "run ./setup.sh to install it, or use --peers none")


def check(peers: list[str], records: list[int]) -> None:
    """The peers are installed and take the records asked for: refused before anything runs."""
    for peer in peers:
        binary(peer)
    if "iozone" in peers and max(records) > IOZONE_MAX_RECORD:
        raise UserError(f"--records up to {max(records) >> 20}M: IOzone takes records up to 16M (--peers iozone)")


@cache
def version(peer: str) -> str:
    flag = "-v" if peer == "iozone" else "--version"
    text = subprocess.run([binary(peer), flag], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"Version \$Revision: ([\d.]+)", text) if peer == "iozone" else re.search(r"fio-([\w.]+)", text)
    return m.group(1) if m else "?"


def run(peer: str, path: Path, size: int, record: int, mode: str, ops: list[str], drop: bool) -> dict:
    """{op: {"mbps", "resident", "coarse"}} of one run of `peer` on a cell; the file is gone after."""
    try:
        path.unlink(missing_ok=True)  # both write a new file, as geofed does
        return (iozone if peer == "iozone" else fio)(path, size, record, mode, ops, drop)
    finally:
        path.unlink(missing_ok=True)


def _call(argv: list[str], what: str) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise JobFailed(f"{what}: no result within {TIMEOUT_S} s ({' '.join(argv)})") from None
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:]
        raise JobFailed(f"{what} failed (exit {done.returncode}): {' '.join(last)} ({' '.join(argv)})")
    return done.stdout


def iozone(path: Path, size: int, record: int, mode: str, ops: list[str], drop: bool) -> dict:
    """IOzone's -e puts an fsync inside the time of every operation, reads too (tens of
    microseconds, half the time of a cached 1 MiB read): its reads run without it, so
    that only writes hold an fsync, as in geofed."""
    base = [binary("iozone"), "-w", "-s", f"{size // 1024}k", "-r", f"{record // 1024}k", "-f", str(path)]
    base += {"sync": ["-o"], "direct": ["-I"]}.get(mode, [])
    out = parse_iozone(_call(base + ["-e", "-i", "0"], "iozone"))
    reads = (["-i", "1"] if {"read", "reread"} & set(ops) else []) + (["-i", "2"] if "randread" in ops else [])
    if reads:
        share = None
        if drop and "read" in ops:  # geofed drops the pages before `read` only
            drop_cache(path)
            share = resident(path)
        out |= parse_iozone(_call(base + reads, "iozone"))
        if "read" in out:
            out["read"]["resident"] = share
    if "randwrite" in ops:
        out["randwrite"] = parse_iozone(_call(base + ["-e", "-i", "2"], "iozone"))["randwrite"]
    return {op: out[op] for op in ops}


def parse_iozone(text: str) -> dict:
    """{op: {"mbps"}} from IOzone's result table: each figure sits under (within a column
    or so of the end of) its column's name."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if re.match(r"\s+kB\s+reclen\s", line):
            break
    else:
        raise JobFailed("iozone: no result table in its output")
    ends = [m.end() for m in re.finditer(r"\S+", lines[i])]
    out = {}
    for m in re.finditer(r"\S+", lines[i + 1]):
        column = min(range(len(ends)), key=lambda k: abs(ends[k] - m.end()))
        name = IOZONE_COLUMNS[column]
        if name in FIO_RW:
            out[name] = {"mbps": float(m.group()) * 1024 / 1e6}
    return out


def fio(path: Path, size: int, record: int, mode: str, ops: list[str], drop: bool) -> dict:
    argv = [binary("fio"), "--output-format=json", "--ioengine=psync", f"--filename={path}", f"--bs={record}",
            f"--size={size}", "--fallocate=none", "--stonewall", f"--direct={int(mode == 'direct')}",
            f"--sync={int(mode == 'sync')}"]
    for op in FIO_RW:
        if op != "write" and op not in ops:
            continue
        argv += [f"--name={op}", f"--rw={FIO_RW[op]}", f"--invalidate={int(op == 'read' and drop)}"]
        if op in ("write", "rewrite", "randwrite"):
            argv.append("--end_fsync=1")
    out = parse_fio(_call(argv, "fio"))
    return {op: out[op] for op in ops}


def parse_fio(text: str) -> dict:
    """{op: {"mbps", "coarse"}} from fio's JSON (job names are the operations)."""
    doc = json.loads(text[text.index("{"):])
    out = {}
    for job in doc["jobs"]:
        op = job["jobname"]
        if op in ("write", "rewrite", "randwrite"):
            side = job["write"]
            ms = side["runtime"]
            out[op] = {"mbps": side["io_bytes"] / ms / 1e3 if ms else None, "coarse": ms < FIO_COARSE_MS}
        else:
            side = job["read"]
            ns = side["lat_ns"]["mean"] * side["lat_ns"]["N"]
            out[op] = {"mbps": side["io_bytes"] / ns * 1e3 if ns else None, "coarse": False}
    return out
