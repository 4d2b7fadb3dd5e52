"""The two ends of `geofed transfer`: a sender and a receiver, each one process in its node.

    python -m geofed.ops.xfer_ends recv --bind ADDR --dest PATH [--delete]   (prints its port, then waits)
    python -m geofed.ops.xfer_ends send --connect ADDR:PORT --source PATH --streams N [--copy-links] [--dry-run]

Both read the transfer's secret from GEOFED_XFER_SECRET (hex) or, started over ssh
(--ssh), from the first line of their standard input; never from the command line.
Every connection starts with a mutual challenge: each side sends 16 random bytes and
the other answers with HMAC-SHA256(secret, role + challenge), so neither end talks to a
peer that does not know the secret.

One control connection, then N data connections. Over the control connection the
sender streams its plan while it walks the source (once): a head (the protocol version,
whether this is a dry run), batches of entries in walk order (a directory before what
it holds): directories, files (size and the extents that hold data: holes are not
sent), symbolic links (their target) and hard links (the earlier entry they share an
inode with), each with its mode, owner and mtime; then its end, with the chunk size.
The receiver looks at each batch as it comes (nothing below a directory it is to make),
and once the plan is in answers with the chunks it already holds, verified: a file
whose size and mtime already match (rsync's quick check) is held whole; otherwise the
manifest beside its partial file (DEST.geofed-partial.manifest: the source file's size
and mtime, then one line "offset digest" per verified chunk) is checked again against
the data on disk, so a chunk damaged since is sent again (all of them if the source
file changed). It refuses a plan whose bytes still to write do not fit. Each data
connection carries bundles (header: number, pieces, bytes, BLAKE3-128 digest; a table
of entry, offset, length per piece; then the bytes): a chunk of a file cut in several
goes alone, files of one piece go packed, many to a bundle, so a tree of small files
costs neither a round trip nor a message per file. The receiver hashes what arrived
and acknowledges the bundle; a bundle whose digest differs is refused and sent again.
A chunk of a large file is written in place (pwrite into DEST.geofed-partial) and
recorded in the manifest; a file that has all its chunks gets its mode, owner and mtime
and is renamed to its name at once. A file of one piece is written whole with its
metadata and needs no manifest (it is there or not): under its own name where nothing
stood (its mtime, set last, tells the quick check whether it arrived), else through a
partial file and a rename. When every bundle is acknowledged the receiver makes the
links, removes what the source no longer has (--delete) and sets the directories'
metadata, deepest first.

Sources: a file, a directory tree, or `mem:SIZE` (bytes made in memory: the network and
the ends, no disk). Sinks: a path, or /dev/null (verified, not kept). Each end prints
JSON lines on stdout: events, progress, and at the end its CPU seconds (getrusage).
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import hashlib
import hmac
import json
import os
import queue
import resource
import shutil
import socket
import stat
import struct
import sys
import termios
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn
from pathlib import Path

import blake3

# 2: entries with their kind and metadata, sparse extents, dry run; 3: the plan streamed in
# batches, the chunk size chosen by the sender, files of one piece packed into bundles
PROTOCOL = 3
BUNDLE = struct.Struct("<IIQ16s")  # bundle number, pieces, bytes, digest of the bytes
PIECE = struct.Struct("<IQI")  # entry index, offset, length
ACK = struct.Struct("<IB")  # bundle number, 1 = verified
PLAN_BATCH = 4096  # entries per plan message
MAX_PIECES = 1024  # files per bundle: a million tiny files make a thousand bundles
MAX_CHUNK, MIN_CHUNK, CHUNKS_PER_STREAM = 8 << 20, 256 << 10, 16
PARTIAL = ".geofed-partial"
MANIFEST = ".geofed-partial.manifest"
NULL_SINK = "/dev/null"
MEM_PREFIX = "mem:"
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33  # linux/asm-generic/socket.h; Python's socket module has neither
# struct tcp_info (linux/tcp.h, Linux 4.19 on): tcpi_bytes_sent and tcpi_bytes_retrans; and
# tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited (microseconds the socket had data in
# flight, and of them those the receiver's window or the send buffer held it)
TCP_INFO_SENT = struct.Struct("<QQ")
TCP_INFO_SENT_AT = 200
TCP_INFO_LIMITED = struct.Struct("<QQQ")
TCP_INFO_LIMITED_AT = 168
# The window in which the sender measures the path's loss: after slow start, whose
# overshoot of the link's queue loses frames on any path (298 retransmissions in the
# first second of 2 cubic streams on a clean 9 ms link, none after).
PROBE_FROM_S, PROBE_FOR_S = 1.0, 1.0
# The receiver's read: a block waited for in the kernel, then hashed (and written) while in
# the CPU's second-level cache (1 MiB a core here)
RECV_BLOCK = 256 << 10


class Refused(RuntimeError):
    pass


def digest(data) -> bytes:
    """BLAKE3, 128 bits: 6 GB/s on one core here, against 0.7 for the standard library's BLAKE2b,
    which held the whole transfer to 2.5 Gb/s."""
    return blake3.blake3(data).digest(16)


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")  # one write: the data threads emit too
    sys.stdout.flush()


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def secret(over_ssh: bool) -> bytes:
    """The transfer's secret: from the environment, or for an end started over ssh (which
    passes no environment, and shows a command line to every user of the node) the first
    line of its standard input; such an end then stops when its standard input closes,
    that is when its ssh session ends."""
    if not over_ssh:
        return bytes.fromhex(os.environ["GEOFED_XFER_SECRET"])
    key = bytes.fromhex(sys.stdin.readline().strip())
    threading.Thread(target=stop_at_end_of_input, daemon=True).start()
    return key


def stop_at_end_of_input() -> None:
    while sys.stdin.readline():
        pass
    os._exit(1)  # said to no one: the session that read this end's output is gone


def leave() -> NoReturn:
    """The end's work is done and said (files closed, its last event flushed): exit without
    freeing its plan entry by entry, which takes seconds for a million files."""
    os._exit(0)


def recv_exact(sock: socket.socket, n: int) -> memoryview:
    buf = memoryview(bytearray(n))
    got = 0
    while got < n:
        k = sock.recv_into(buf[got:n])
        if k == 0:
            raise ConnectionError("the peer closed the connection")
        got += k
    return buf[:n]


def recv_hashed(sock: socket.socket, n: int, into: memoryview, each=None) -> tuple[bytes, float, int]:
    """n bytes read a block at a time and hashed, each block at once, while it is still in
    the CPU's cache (a chunk hashed whole after it arrived came back from memory: 0.45 CPU
    s/GB at 50 ms, 0.28 in blocks). Each block goes to its place in `into`
    (which holds n bytes) or, with `each`, to into's start (one block's room), and each(block,
    offset) is called with it. Each read waits in the kernel for its whole block
    (MSG_WAITALL: one system call and one taking of the GIL per block). Returns the digest,
    the seconds spent in the kernel receiving, and how many of the bytes were already waiting
    in the socket when each read began (the network delivered them faster than this end
    took them)."""
    hasher = blake3.blake3()
    got, waited, queued = 0, 0.0, 0
    fd, count = sock.fileno(), bytearray(4)
    while got < n:
        want = min(n - got, RECV_BLOCK)
        block = into[:want] if each else into[got:got + want]
        fcntl.ioctl(fd, termios.FIONREAD, count)
        queued += min(want, int.from_bytes(count, sys.byteorder))
        t0 = time.perf_counter()
        k = sock.recv_into(block, 0, socket.MSG_WAITALL)
        waited += time.perf_counter() - t0
        if k == 0:
            raise ConnectionError("the peer closed the connection")
        hasher.update(block[:k])
        if each:
            each(block[:k], got)
        got += k
    return hasher.digest(16), waited, queued


def run_delay_s() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU (the kernel's
    schedstat): what an end loses to other processes on the CPUs it shares with them."""
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def handshake(sock: socket.socket, key: bytes, me: bytes, peer: bytes) -> None:
    """Mutual challenge: prove the secret to the peer, and make the peer prove it."""
    mine = os.urandom(16)
    sock.sendall(mine)
    theirs = bytes(recv_exact(sock, 16))
    sock.sendall(hmac.new(key, me + theirs, hashlib.sha256).digest())
    try:
        answer = bytes(recv_exact(sock, 32))
    except ConnectionError:
        raise Refused("the other end refused this transfer's secret") from None
    if not hmac.compare_digest(answer, hmac.new(key, peer + mine, hashlib.sha256).digest()):
        raise Refused("the other end does not know this transfer's secret")


def send_json(sock: socket.socket, doc) -> None:
    data = json.dumps(doc).encode()
    sock.sendall(struct.pack("<I", len(data)) + data)


def recv_json(sock: socket.socket):
    n = struct.unpack("<I", recv_exact(sock, 4))[0]
    return json.loads(bytes(recv_exact(sock, n)))


def pieces(extents: list, chunk: int) -> list[tuple[int, int]]:
    """(offset, length) of the chunks a file is sent in: its data extents cut on the chunk
    grid, so the same file and chunk size give the same chunks (resume); holes are not sent."""
    out = []
    for start, n in extents:
        off, end = start, start + n
        while off < end:
            stop = min(end, (off // chunk + 1) * chunk)
            out.append((off, stop - off))
            off = stop
    return out


def congestion(sock: socket.socket) -> str:
    """The congestion control the kernel runs on this socket."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0].decode()


def sent_and_retransmitted(sock: socket.socket) -> tuple[int, int]:
    """Bytes this socket has sent and, of them, sent again (the kernel's TCP_INFO)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_SENT_AT + TCP_INFO_SENT.size)
    return TCP_INFO_SENT.unpack_from(info, TCP_INFO_SENT_AT)


def limited_s(sock: socket.socket) -> tuple[float, float, float]:
    """Seconds this socket has been busy sending (data in flight) and, of them, held by the
    receiver's window (a receiver that does not read fast enough, or whose buffer is too
    small) and by its own send buffer (the kernel's TCP_INFO)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LIMITED_AT + TCP_INFO_LIMITED.size)
    return tuple(us / 1e6 for us in TCP_INFO_LIMITED.unpack_from(info, TCP_INFO_LIMITED_AT))


def retransmitted_share(counts: list[tuple[int, int]]) -> float:
    sent = sum(c[0] for c in counts)
    return sum(c[1] for c in counts) / sent if sent else 0.0


def set_buffers(sock: socket.socket, nbytes: int) -> None:
    """The socket's send and receive buffers (0: Linux's autotuning left alone). Linux caps
    SO_SNDBUF and SO_RCVBUF at net.core.wmem_max and rmem_max (4 MB on this host, and not
    settable in a namespace): 2 streams of 15.6 MB asked on a 50 ms, 10 Gb/s link got 4
    MB each, 1649 Mb/s where iperf3, autotuned, moved 2375. Root sets them past the cap
    (SO_SNDBUFFORCE, SO_RCVBUFFORCE); another user whose buffers would be capped leaves
    autotuning on, which may grow them to tcp_rmem's maximum."""
    if nbytes <= 0:
        return
    if os.geteuid() == 0:
        sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, nbytes)
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, nbytes)
    elif nbytes <= min(int(Path(f"/proc/sys/net/core/{m}").read_text()) for m in ("rmem_max", "wmem_max")):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, nbytes)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, nbytes)


# ---------------------------------------------------------------- sources


def extents(path: str, st: os.stat_result) -> list[list[int]]:
    """[offset, length] of the parts of a file that hold data: SEEK_DATA/SEEK_HOLE, asked
    only of a file with fewer blocks than its size (one without holes is one extent)."""
    if st.st_blocks * 512 >= st.st_size:
        return [[0, st.st_size]] if st.st_size else []
    out, off = [], 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while off < st.st_size:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:  # nothing but a hole to the end
                    break
                raise
            off = min(os.lseek(fd, start, os.SEEK_HOLE), st.st_size)
            out.append([start, off - start])
    finally:
        os.close(fd)
    return out


def walk(source: str, copy_links: bool, not_sent: list[str]) -> Iterator[dict]:
    """The source's entries in walk order (a directory before what it holds; "" is the
    source itself), yielded as they are found so that the plan goes out while the tree is
    still being read; the relative paths not sent are added to not_sent: devices, FIFOs
    and sockets, and with copy_links a link to nothing or a directory loop. copy_links: a
    symbolic link is sent as what it points to, like rsync's -L."""
    if source.startswith(MEM_PREFIX):
        size = int(source[len(MEM_PREFIX):])
        yield {"path": "", "type": "file", "size": size, "data": [[0, size]] if size else []}
        return
    first_of_inode: dict[tuple[int, int], str] = {}
    todo = [("", ())]
    while todo:
        rel, ancestors = todo.pop()
        path = os.path.join(source, rel) if rel else source
        try:
            st = os.stat(path) if copy_links else os.lstat(path)
        except FileNotFoundError:
            not_sent.append(rel)
            continue
        entry = {"path": rel, "mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
                 "mtime_ns": st.st_mtime_ns}
        inode = (st.st_dev, st.st_ino)
        if stat.S_ISDIR(st.st_mode):
            if inode in ancestors:
                not_sent.append(rel)
                continue
            yield entry | {"type": "dir"}
            names = sorted(os.listdir(path), reverse=True)  # popped in order
            todo += [(os.path.join(rel, name) if rel else name, ancestors + (inode,)) for name in names]
        elif stat.S_ISLNK(st.st_mode):
            yield entry | {"type": "link", "target": os.readlink(path)}
        elif stat.S_ISREG(st.st_mode):
            if st.st_nlink > 1 and inode in first_of_inode:
                yield entry | {"type": "hardlink", "to": first_of_inode[inode]}
            else:
                first_of_inode.setdefault(inode, rel)
                yield entry | {"type": "file", "size": st.st_size, "data": extents(path, st)}
        else:
            not_sent.append(rel)


def chunk_for(total: int, streams: int) -> int:
    """Chunks of 8 MiB, smaller (down to 256 KiB, a power of two) until every stream has
    16 to take from the shared queue: the transfer ends when the last chunk does, and on
    a lossy link one stream's chunk can take seconds (2 MiB at 1 % loss and 9 ms: 1.3 s),
    while the others wait. The same size and stream count give the same chunks, so the
    same command resumes."""
    chunk = MAX_CHUNK
    while chunk > MIN_CHUNK and total < CHUNKS_PER_STREAM * streams * chunk:
        chunk //= 2
    return chunk


def bundles(entries: list[dict], held: dict[int, set], chunk: int) -> list[list[tuple[int, int, int]]]:
    """What goes on the streams, in walk order, as lists of (entry, offset, length) sent as
    one message: a chunk of a file cut in several goes alone (its manifest records it);
    files that fit in one piece are packed together up to a chunk's bytes or MAX_PIECES
    files, a bundle taking its place in the order at its first file, so a tree of small
    files costs a message per bundle, not a round trip or a message per file."""
    out: list[list[tuple[int, int, int]]] = []
    small, small_bytes = None, 0
    for i, e in enumerate(entries):
        if e["type"] != "file":
            continue
        whole = pieces(e["data"], chunk)
        cut = [(off, n) for off, n in whole if off not in held.get(i, ())]
        if len(whole) == 1 and cut:
            off, n = cut[0]
            if small is None or small_bytes + n > chunk or len(small) == MAX_PIECES:
                small, small_bytes = [], 0
                out.append(small)
            small.append((i, off, n))
            small_bytes += n
        else:
            out += [[(i, off, n)] for off, n in cut]
    return out


# ---------------------------------------------------------------- receiver


class Receiver:
    def __init__(self, dest: str, delete: bool):
        self.dest, self.delete = dest, delete
        self.null = dest == NULL_SINK
        self.root = os.geteuid() == 0  # ownership is kept only by root, as numeric ids
        self.lock = threading.Lock()
        self.corrupt = 0
        self.received = 0
        self.queued = 0  # of the bytes received, those already waiting in the socket when read
        self.streams = 0
        # summed over the data threads: waiting for bytes, writing them, waiting for a CPU
        self.waited_s = self.written_s = self.cpu_waited_s = 0.0
        self.files_left = 0
        self.deleted: list[str] = []
        self.finished = threading.Event()
        self.entries: list[dict] = []
        self.fresh: set[str] = set()  # directories this transfer makes: nothing is there below them
        self.actions: list[tuple[str, str]] = []  # what makes way and the directories, done once the plan is in
        self.changes: list[tuple[int, list]] = []  # (entry index, change) for a dry run's list
        # A file this transfer makes in a directory it made belongs to the receiver's user and
        # group (the directories get their modes, set-group-ID too, only at the end), unless
        # a directory above them passes its group down.
        self.made_as = (os.geteuid(), os.getegid())
        self.group_inherited = False

    def target(self, rel: str) -> str:
        return os.path.join(self.dest, rel) if rel else self.dest

    def begin(self, head: dict) -> None:
        if head.get("protocol") != PROTOCOL:
            raise Refused(f"the sender speaks transfer protocol {head.get('protocol', 1)}, this receiver {PROTOCOL}: "
                          "run the same geofed at both ends")
        self.dry_run = head["dry_run"]

    def add(self, batch: list[dict]) -> None:
        """A batch of the plan's entries: each looked at where it goes (nothing is looked at
        below a directory this transfer makes), nothing changed yet."""
        for e in batch:
            i = len(self.entries)
            self.entries.append(e)
            rel = e["path"]
            if os.path.isabs(rel) or ".." in rel.split(os.sep):
                raise Refused(f"entry {rel!r} leaves the destination")
            if self.null:
                continue
            e["fresh"] = fresh = os.path.dirname(rel) in self.fresh if rel else False
            try:
                there = None if fresh else os.lstat(self.target(rel))
            except FileNotFoundError:
                there = None
            if there is not None:
                self.make_way(i, e, there)
            if e["type"] == "dir" and (there is None or not stat.S_ISDIR(there.st_mode)):
                self.fresh.add(rel)
                self.actions.append(("mkdir", rel))
                self.changes.append((i, ["mkdir", rel]))
            elif e["type"] == "file":
                e["current"] = there is not None and self.up_to_date(e, there)
                e["new"] = there is None
            elif e["type"] in ("link", "hardlink") and (fresh or not self.link_in_place(e)):
                self.changes.append((i, [e["type"], rel, e.get("target") or e.get("to")]))

    def settle(self, chunk: int) -> dict:
        """The plan is in: say which chunks are held (whole files that match, chunks in a
        manifest that still verify), check that what is left fits, then make way and the
        directories; in a dry run, change nothing and say what would be done."""
        self.chunk = chunk
        held, need = {}, 0
        for i, e in enumerate(self.entries):
            if e["type"] != "file":
                continue
            whole = dict(pieces(e["data"], chunk))
            e["single"] = len(whole) == 1  # sent in a bundle, written whole
            e["left"] = left = self.still_to_send(e, whole)
            if len(left) < len(whole):
                held[i] = sorted(set(whole) - set(left))
            need += sum(left.values())
            if not self.null and (left or not e["current"]):
                self.changes.append((i, ["send", e["path"], sum(left.values())]))
        if self.dry_run:
            return {"held": held, "corrupt_found": self.corrupt,
                    "changes": [c for _, c in sorted(self.changes, key=lambda c: c[0])]
                    + [["delete", rel] for rel in self.extraneous()]}
        if not self.null:
            self.check_space(need)
            for what, rel in self.actions:
                if what == "mkdir":
                    if not (rel and os.path.dirname(rel) in self.fresh):  # made in a directory that was there
                        self.group_inherited |= bool(os.stat(os.path.dirname(self.target(rel))).st_mode & stat.S_ISGID)
                    os.mkdir(self.target(rel))
                else:
                    remove(self.target(rel))
        for e in self.entries:
            if e["type"] == "file":
                if e["left"]:
                    self.files_left += 1
                elif not self.null:
                    self.complete(e)
        if self.files_left == 0:
            self.finished.set()
        return {"held": held, "corrupt_found": self.corrupt}

    def check_space(self, need: int) -> None:
        where = self.dest
        while not os.path.isdir(where):
            where = os.path.dirname(where)
        free = shutil.disk_usage(where).free
        if need > free:
            raise Refused(f"no space: {need / 1e6:.1f} MB to write, {free / 1e6:.1f} MB free in {where}")

    def make_way(self, i: int, e: dict, there: os.stat_result) -> None:
        """What stands where the entry goes and is of another kind: a file or link in the
        way of a directory goes; a directory in the way of anything else goes with --delete
        only (it may hold data the user wants)."""
        if stat.S_ISDIR(there.st_mode) == (e["type"] == "dir"):
            return
        if stat.S_ISDIR(there.st_mode) and not self.delete:
            raise Refused(f"{self.target(e['path'])} is a directory and the source's {e['path'] or 'source'} is not: "
                          "remove it, or use --delete")
        self.changes.append((i, ["delete", e["path"]]))
        self.actions.append(("delete", e["path"]))

    def still_to_send(self, e: dict, whole: dict[int, int]) -> dict[int, int]:
        """{offset: length} of the file's chunks (whole: all of them) not held verified at
        the destination."""
        left = dict(whole)
        if self.null or e["fresh"]:
            return left
        final = self.target(e["path"])
        partial, manifest = final + PARTIAL, final + MANIFEST
        has_partial = os.path.exists(partial)
        if e["current"] and not has_partial:
            return {}
        try:
            lines = Path(manifest).read_text().splitlines() if has_partial else []
        except FileNotFoundError:
            lines = []
        if lines[:1] != [stamp(e)]:  # none, or the source changed since: start the file over
            if not self.dry_run:  # the old bytes go too: where the source now has a hole they would stay
                Path(manifest).unlink(missing_ok=True)
                Path(partial).unlink(missing_ok=True)
            return left
        good = lines[:1]
        with open(partial, "rb") as f:
            for line in lines[1:]:
                off, hexd = line.split()
                off = int(off)
                if off in left and digest(os.pread(f.fileno(), left[off], off)) == bytes.fromhex(hexd):
                    good.append(line)
                    del left[off]
                else:
                    self.corrupt += 1
        if not self.dry_run:
            Path(manifest).write_text("".join(line + "\n" for line in good))
        e["current"] = False
        return left

    @staticmethod
    def up_to_date(e: dict, there: os.stat_result) -> bool:
        """rsync's quick check: a regular file of the same size and mtime is taken as sent."""
        return stat.S_ISREG(there.st_mode) and there.st_size == e["size"] and there.st_mtime_ns == e.get("mtime_ns")

    def link_in_place(self, e: dict) -> bool:
        final = self.target(e["path"])
        if e["type"] == "link":
            return os.path.islink(final) and os.readlink(final) == e["target"]
        try:
            here, first = os.lstat(final), os.lstat(self.target(e["to"]))
        except FileNotFoundError:
            return False
        return (here.st_dev, here.st_ino) == (first.st_dev, first.st_ino)

    def open(self, e: dict) -> int:
        """The file's partial file, opened on its first chunk: as long as the file and sparse
        (writes fill it in place; holes stay holes), readable by its owner only until done."""
        with self.lock:
            if e.get("fd") is None:
                fd = os.open(self.target(e["path"]) + PARTIAL, os.O_RDWR | os.O_CREAT, 0o600)
                os.ftruncate(fd, e["size"])
                e["fd"] = fd
            return e["fd"]

    def data(self, sock: socket.socket) -> None:
        """One data connection's bundles. A chunk of a file cut in several (and anything
        going to /dev/null) is taken a block at a time through one block's buffer, each
        block written in place as it comes (pwrite into the partial file): the copy from the
        kernel and the hash stay in the CPU's cache, and until the chunk's digest is checked
        its bytes are only in the partial file, not in its manifest, so a chunk refused or
        cut short is sent again, here or on resuming. Files of one piece, packed, are held
        whole until checked, then each written with its metadata."""
        block = memoryview(bytearray(min(RECV_BLOCK, self.chunk)))
        whole = None  # a bundle's room, made for the first bundle of packed files
        with self.lock:
            self.streams += 1
        delayed = run_delay_s()
        while True:
            t0 = time.perf_counter()
            try:
                number, count, length, want = BUNDLE.unpack(bytes(recv_exact(sock, BUNDLE.size)))
            except ConnectionError:
                return
            table = bytes(recv_exact(sock, PIECE.size * count))
            t1 = time.perf_counter()
            idx, off, _ = PIECE.unpack_from(table)
            first, writing_s = self.entries[idx], 0.0
            if self.null or not first["single"]:
                fd = self.open(first) if not self.null and off in first["left"] else None

                def write(data: memoryview, at: int) -> None:
                    nonlocal writing_s
                    if fd is not None:
                        w0 = time.perf_counter()
                        os.pwrite(fd, data, off + at)
                        writing_s += time.perf_counter() - w0

                found, receiving_s, queued = recv_hashed(sock, length, block, write)
                payload = None
            else:
                if whole is None:
                    whole = memoryview(bytearray(self.chunk))
                found, receiving_s, queued = recv_hashed(sock, length, whole)
                payload = whole[:length]
            ok = found == want
            delayed, before = run_delay_s(), delayed
            with self.lock:
                self.received += length
                self.queued += queued
                self.corrupt += not ok
                self.waited_s += t1 - t0 + receiving_s
                self.cpu_waited_s += delayed - before
            t2 = time.perf_counter()
            at, done = 0, 0
            for k in range(count if ok else 0):
                idx, off, n = PIECE.unpack_from(table, k * PIECE.size)
                e = self.entries[idx]
                if e["single"]:  # only this bundle carries it: no lock
                    if not self.null:
                        self.write_whole(e, off, payload[at:at + n])
                    done += 1
                else:
                    done += self.arrived(e, off, want)
                at += n
            with self.lock:
                self.written_s += writing_s + time.perf_counter() - t2
                self.files_left -= done
                if done and self.files_left == 0:
                    self.finished.set()
            sock.sendall(ACK.pack(number, ok))

    def arrived(self, e: dict, off: int, want: bytes) -> bool:
        """A verified chunk of a file cut in several, written in place as it came: recorded
        in its manifest (want is its digest); whether it completed the file (then named)."""
        with self.lock:
            if off not in e["left"]:
                return False  # sent again after a refusal of a copy that did arrive
            if not self.null:
                if e.get("manifest") is None:
                    e["manifest"] = open(self.target(e["path"]) + MANIFEST, "a")
                    if e["manifest"].tell() == 0:
                        e["manifest"].write(stamp(e) + "\n")
                e["manifest"].write(f"{off} {want.hex()}\n")
                e["manifest"].flush()
            del e["left"][off]
            done = not e["left"]
        if done and not self.null:
            self.complete(e)
        return done

    def write_whole(self, e: dict, off: int, piece: memoryview) -> None:
        """A file of one piece: written, given its metadata and named at once (no manifest:
        it is there or not). Where nothing stood when the plan came, it is written under its
        own name (a rename less per file): until its mtime is set last, the quick check
        does not take it as sent, and it is readable by its owner only."""
        final = self.target(e["path"])
        where = final if e["new"] else final + PARTIAL
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            if off or len(piece) != e["size"]:  # holes around its one extent
                os.ftruncate(fd, e["size"])
            os.pwrite(fd, piece, off)
            self.set_metadata(fd, e, owned=e["fresh"] and not self.group_inherited)
        finally:
            os.close(fd)
        if where != final:
            os.replace(where, final)

    def complete(self, e: dict) -> None:
        """A file all of whose chunks are verified: its metadata, then its name (an
        interrupted transfer leaves partial files only for files still arriving)."""
        final = self.target(e["path"])
        if e.get("fd") is None and e["current"] and not os.path.exists(final + PARTIAL):
            self.set_metadata(final, e)  # held whole already: its mode or owner may differ
            Path(final + MANIFEST).unlink(missing_ok=True)  # left if stopped between the rename and its removal
            return
        fd = self.open(e)
        self.set_metadata(fd, e)
        os.close(fd)
        if e.get("manifest") is not None:
            e["manifest"].close()
        os.replace(final + PARTIAL, final)
        if e.get("manifest") is not None or not e["fresh"]:
            Path(final + MANIFEST).unlink(missing_ok=True)

    def set_metadata(self, where, e: dict, link: bool = False, owned: bool = False) -> None:
        """Owner (root only; not when the file was made with it: owned), mode (not of a
        symbolic link: Linux has none) and mtime; the access time is left to now. The owner
        first: chown clears set-user-ID bits."""
        if "mode" not in e:  # bytes made in memory have none
            return
        nofollow = {"follow_symlinks": False} if link else {}
        if self.root and not (owned and (e["uid"], e["gid"]) == self.made_as):
            os.chown(where, e["uid"], e["gid"], **nofollow)
        if not link:
            os.chmod(where, e["mode"])
        os.utime(where, ns=(time.time_ns(), e["mtime_ns"]), **nofollow)

    def finish(self) -> None:
        """Links, then --delete, then the directories' metadata, deepest first (making
        anything inside a directory changes its mtime)."""
        if self.dry_run or self.null:
            return
        for e in self.entries:
            final = self.target(e["path"])
            if e["type"] in ("link", "hardlink") and not self.link_in_place(e):
                temp = Path(final + PARTIAL)
                temp.unlink(missing_ok=True)
                if e["type"] == "link":
                    os.symlink(e["target"], temp)
                else:
                    os.link(self.target(e["to"]), temp)
                os.replace(temp, final)
            if e["type"] == "link":
                self.set_metadata(final, e, link=True)
        if self.delete:
            for rel in self.extraneous():
                remove(self.target(rel))
                self.deleted.append(rel)
        for e in reversed(self.entries):
            if e["type"] == "dir":
                self.set_metadata(self.target(e["path"]), e)

    def extraneous(self) -> list[str]:
        """With --delete, what the destination tree holds and the source does not (the top
        of each such subtree); a transfer's own partial files are not extraneous."""
        if not self.delete or self.null or not self.entries or self.entries[0]["type"] != "dir":
            return []
        kinds = {e["path"]: e["type"] for e in self.entries}
        out, todo = [], [""]
        while todo:
            rel = todo.pop()
            if rel in self.fresh:  # made by this transfer (or, in a dry run, not there yet): only its own
                continue
            for name in sorted(os.listdir(self.target(rel))):
                r = os.path.join(rel, name) if rel else name
                own = next((r[:-len(s)] for s in (MANIFEST, PARTIAL) if r.endswith(s)), None)
                if r not in kinds and kinds.get(own) not in ("file", "link", "hardlink"):
                    out.append(r)
                elif kinds.get(r) == "dir" and os.path.isdir(self.target(r)) and not os.path.islink(self.target(r)):
                    todo.append(r)
        return sorted(out)


def stamp(e: dict) -> str:
    """A manifest's first line: the source file it holds chunks of, by size and mtime."""
    return f"source {e['size']} {e.get('mtime_ns')}"


def remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def take_plan(rx: Receiver, sock: socket.socket) -> dict:
    """The plan as it streams in (its head, batches of entries, its end with the chunk
    size), and the receiver's answer. A refused batch stops the looking but not the
    reading, so the sender, still sending, gets the refusal and not a reset connection."""
    rx.begin(recv_json(sock))
    refused = None
    while "end" not in (msg := recv_json(sock)):
        if refused is None:
            try:
                rx.add(msg["entries"])
            except Refused as e:
                refused = e
    if refused is not None:
        raise refused
    return rx.settle(msg["chunk"])


def authenticated(sock: socket.socket, peer: str, key: bytes, buffer: int) -> bytes | None:
    """The connection's kind (C: control, D: data) once it has proved the secret; None,
    said in a "refused" event, if it has not."""
    try:
        set_buffers(sock, buffer)
        handshake(sock, key, b"recv", b"send")
        return bytes(recv_exact(sock, 1))
    except (Refused, ConnectionError, OSError) as e:
        emit(event="refused", peer=peer, reason=str(e))
        return None


def admit(rx: Receiver, sock: socket.socket, peer: str, key: bytes, buffer: int) -> None:
    """A data connection, in a thread of its own from its handshake on: each handshake waits
    a round trip for the peer's answer, and one after the other they held the last of 8
    streams 0.35 s at 50 ms."""
    if authenticated(sock, peer, key, buffer) == b"D":
        rx.data(sock)
    else:
        sock.close()


def recv_main(a) -> int:
    key = secret(a.ssh)
    srv = socket.create_server((a.bind, 0), backlog=64)
    emit(event="listening", port=srv.getsockname()[1])
    srv.settimeout(0.1)  # wake up to see the data threads finish the transfer
    rx: Receiver | None = None
    t0 = time.perf_counter()
    try:
        while rx is None or not rx.finished.is_set():
            try:
                sock, peer = srv.accept()
            except socket.timeout:
                if rx is None and time.perf_counter() - t0 > a.timeout:
                    emit(event="error", message=f"no sender within {a.timeout:g} s")
                    return 1
                continue
            sock.settimeout(None)
            if rx is not None:  # a data connection, authenticated beside the others
                threading.Thread(target=admit, args=(rx, sock, peer[0], key, a.buffer), daemon=True).start()
                continue
            if authenticated(sock, peer[0], key, a.buffer) != b"C":  # refused, or not the control connection
                sock.close()
                continue
            rx = Receiver(a.dest, a.delete)
            try:
                answer = take_plan(rx, sock)
            except Refused as e:
                send_json(sock, {"error": str(e)})
                emit(event="error", message=str(e))
                return 2
            send_json(sock, answer)
            if rx.dry_run:
                rx.finished.set()
            control = sock
        rx.finish()
        send_json(control, {"done": True, "deleted": len(rx.deleted)})
        emit(event="done", bytes=rx.received, seconds=time.perf_counter() - t0, cpu_s=cpu_seconds(),
             corrupt=rx.corrupt, deleted=len(rx.deleted), streams=rx.streams, waited_s=rx.waited_s,
             written_s=rx.written_s, cpu_waited_s=rx.cpu_waited_s, queued=rx.queued)
        leave()
    finally:
        srv.close()


# ---------------------------------------------------------------- sender


def send_plan(control: socket.socket, a) -> tuple[list[dict], list[str], int]:
    """Walk the source once, sending the plan in batches as it is read; then its end with
    the chunk size (chosen from the bytes to move unless given). The entries, what is not
    sent, the chunk size."""
    send_json(control, {"protocol": PROTOCOL, "dry_run": a.dry_run})
    entries: list[dict] = []
    not_sent: list[str] = []
    for e in walk(a.source, a.copy_links, not_sent):
        entries.append(e)
        if len(entries) % PLAN_BATCH == 0:
            send_json(control, {"entries": entries[-PLAN_BATCH:]})
    if len(entries) % PLAN_BATCH:
        send_json(control, {"entries": entries[-(len(entries) % PLAN_BATCH):]})
    total = sum(n for e in entries if e["type"] == "file" for _, n in e["data"])
    chunk = a.chunk or chunk_for(total, a.streams)
    send_json(control, {"end": True, "chunk": chunk})
    return entries, not_sent, chunk


def send_main(a) -> int:
    started = time.perf_counter()
    key = secret(a.ssh)
    host, port = a.connect.rsplit(":", 1)
    mem = a.source.startswith(MEM_PREFIX)

    def connect(kind: bytes) -> socket.socket:
        s = socket.create_connection((host, int(port)))
        set_buffers(s, a.buffer)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # After connecting: the route's congestion control (the testbed's routes name
        # cubic) is applied at connect and would replace one set before it.
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, a.congestion.encode())
        handshake(s, key, b"send", b"recv")
        s.sendall(kind)
        return s

    try:
        control = connect(b"C")
    except Refused as e:
        emit(event="error", message=str(e))
        return 3
    entries, not_sent, chunk = send_plan(control, a)
    answer = recv_json(control)
    plan_s = time.perf_counter() - started
    if "error" in answer:
        emit(event="error", message=answer["error"])
        return 2
    held = {int(k): set(v) for k, v in answer["held"].items()}
    total = sum(n for e in entries if e["type"] == "file" for _, n in e["data"])
    work: queue.Queue = queue.Queue()
    sending = bundles(entries, held, chunk)
    for number in range(len(sending)):
        work.put(number)
    skipped = total - sum(n for b in sending for _, _, n in b)
    counts = {kind: sum(e["type"] == kind for e in entries) for kind in ("file", "dir", "link", "hardlink")}
    emit(event="plan", bytes=total, held=skipped, corrupt_found=answer["corrupt_found"], entries=counts,
         not_sent=not_sent, chunk=chunk)
    if a.dry_run:
        recv_json(control)  # the receiver's end: nothing was changed
        emit(event="dry_run", changes=answer["changes"], not_sent=not_sent)
        return 0
    state = {"sent": 0, "resent": 0, "acked": 0, "left": len(sending), "read_s": 0.0, "send_s": 0.0,
             "cpu_waited_s": 0.0, "busy_s": 0.0, "rwnd_limited_s": 0.0, "sndbuf_limited_s": 0.0}
    tcp_counts: dict[socket.socket, tuple[int, int]] = {}  # each data socket's last TCP_INFO counts
    algorithms: set[str] = set()
    lock = threading.Lock()
    all_acked = threading.Event()
    if not sending:
        all_acked.set()
    pattern = os.urandom(chunk) if mem else None
    pattern_digests: dict[int, bytes] = {}

    def read(bundle: list[tuple[int, int, int]], buf: memoryview) -> memoryview:
        """The bundle's pieces, one after the other, read into the stream's own buffer (no
        new memory per chunk or file)."""
        at = 0
        for idx, off, n in bundle:
            rel = entries[idx]["path"]
            fd = os.open(os.path.join(a.source, rel) if rel else a.source, os.O_RDONLY)
            try:
                while n:
                    got = os.preadv(fd, [buf[at:at + n]], off)
                    if got == 0:
                        raise OSError(f"{rel or a.source}: shorter than when it was read ({off} bytes)")
                    at, off, n = at + got, off + got, n - got
            finally:
                os.close(fd)
        return buf[:at]

    def acks(sock: socket.socket) -> None:
        while True:
            try:
                number, ok = ACK.unpack(bytes(recv_exact(sock, ACK.size)))
            except (ConnectionError, OSError):
                return
            n = sum(p[2] for p in sending[number])
            with lock:
                if ok:
                    state["acked"] += n
                    state["left"] -= 1
                    if state["left"] == 0:
                        all_acked.set()
                else:
                    state["resent"] += 1
            if not ok:
                work.put(number)

    def stream(sock: socket.socket) -> None:
        buf = memoryview(bytearray(chunk)) if not mem else None
        threading.Thread(target=acks, args=(sock,), daemon=True).start()
        delayed = run_delay_s()
        while not all_acked.is_set():
            try:
                number = work.get(timeout=0.05)
            except queue.Empty:
                continue
            bundle = sending[number]
            read_s = 0.0
            if mem:
                data = memoryview(pattern)[:bundle[0][2]]
                # Every memory chunk of a length holds the same bytes: hashing them again
                # would only spend the sender's CPU (the receiver still checks each one).
                sums = pattern_digests.get(len(data)) or pattern_digests.setdefault(len(data), digest(data))
            else:
                t0 = time.perf_counter()
                data = read(bundle, buf)
                read_s = time.perf_counter() - t0  # the digest after it is CPU
                sums = digest(data)
            t1 = time.perf_counter()
            sock.sendall(BUNDLE.pack(number, len(bundle), len(data), sums) + b"".join(PIECE.pack(*p) for p in bundle))
            sock.sendall(data)
            t2 = time.perf_counter()
            delayed, before = run_delay_s(), delayed
            with lock:
                state["sent"] += len(data)
                state["send_s"] += t2 - t1
                state["read_s"] += read_s
                state["cpu_waited_s"] += delayed - before
        with lock:
            tcp_counts[sock] = sent_and_retransmitted(sock)
            for k, v in zip(("busy_s", "rwnd_limited_s", "sndbuf_limited_s"), limited_s(sock)):
                state[k] += v
            algorithms.add(congestion(sock))
        sock.close()

    def probe() -> None:
        """Switch the data streams to bbr if, after slow start, they retransmit more than
        --switch-above of what they send and deliver less than --switch-below bytes/s (the
        path's loss holds them below the link)."""
        if all_acked.wait(PROBE_FROM_S):
            return
        with lock:
            before = {s: sent_and_retransmitted(s) for s in socks}
        if all_acked.wait(PROBE_FOR_S):
            return
        with lock:
            deltas = [tuple(n - m for n, m in zip(sent_and_retransmitted(s), before[s])) for s in before]
            share = retransmitted_share(deltas)
            rate = sum(sent - again for sent, again in deltas) / PROBE_FOR_S
            switch = share > a.switch_above and rate < a.switch_below
            if switch:
                for s in socks:
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"bbr")
        emit(event="probe", retransmitted=share, rate_Bps=rate, switched=switch, seconds=PROBE_FOR_S)

    # The data connections first, side by side (each handshake waits a round trip), as
    # iperf3 does before its clock starts: the data phase is timed from its first byte.
    connecting = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=a.streams) as pool:
            socks = list(pool.map(lambda _: connect(b"D"), range(a.streams if sending else 0)))
    except Refused as e:
        emit(event="error", message=str(e))
        return 3
    t0 = time.perf_counter()
    connect_s = t0 - connecting
    threads = [threading.Thread(target=stream, args=(sock,), daemon=True) for sock in socks]
    for t in threads:
        t.start()
    if a.switch_above and a.congestion != "bbr" and sending:
        threading.Thread(target=probe, daemon=True).start()
    last = 0.0
    while not all_acked.wait(0.25):
        if not any(t.is_alive() for t in threads):
            emit(event="error", message="every data connection ended before the transfer did")
            return 1
        now = time.perf_counter()
        if now - last >= 0.5:
            emit(event="progress", acked=state["acked"], bytes=total - skipped, seconds=now - t0)
            last = now
    seconds = time.perf_counter() - t0
    try:
        end = recv_json(control)  # the receiver has renamed its files, made the links, deleted
    except ConnectionError:
        emit(event="error", message="the receiver ended before confirming the files")
        return 1
    finish_s = time.perf_counter() - t0 - seconds
    for t in threads:  # each has read its socket's counts and closed it
        t.join()
    emit(event="done", bytes=state["sent"], acked=state["acked"], held=skipped, total=total, seconds=seconds,
         resent=state["resent"], cpu_s=cpu_seconds(), streams=a.streams, chunk=chunk, deleted=end["deleted"],
         plan_s=plan_s, connect_s=connect_s, finish_s=finish_s, read_s=state["read_s"], send_s=state["send_s"],
         cpu_waited_s=state["cpu_waited_s"], busy_s=state["busy_s"], rwnd_limited_s=state["rwnd_limited_s"],
         sndbuf_limited_s=state["sndbuf_limited_s"],
         congestion=sorted(algorithms), retransmitted=retransmitted_share(list(tcp_counts.values())))
    leave()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="geofed.ops.xfer_ends")
    sub = ap.add_subparsers(dest="end", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--dest", required=True)
    r.add_argument("--buffer", type=int, default=0)
    r.add_argument("--timeout", type=float, default=60.0)
    r.add_argument("--delete", action="store_true")
    s = sub.add_parser("send")
    s.add_argument("--connect", required=True)
    s.add_argument("--source", required=True)
    s.add_argument("--streams", type=int, default=4)
    s.add_argument("--chunk", type=int, default=0, help="bytes; 0: from the bytes to move (chunk_for)")
    s.add_argument("--buffer", type=int, default=0)
    s.add_argument("--congestion", default="cubic", help="the data streams' TCP congestion control")
    s.add_argument("--switch-above", type=float, default=0.0,
                   help="switch to bbr if after slow start the streams retransmit more than this share (0: never) ...")
    s.add_argument("--switch-below", type=float, default=0.0, help="... and deliver fewer bytes/s than this")
    s.add_argument("--copy-links", action="store_true")
    s.add_argument("--dry-run", action="store_true")
    for end in (r, s):
        end.add_argument("--ssh", action="store_true", help="started over ssh: the secret is the first line of "
                                                            "standard input, whose end stops this end")
    a = ap.parse_args(argv)
    try:
        return recv_main(a) if a.end == "recv" else send_main(a)
    except (ConnectionError, OSError) as e:
        emit(event="error", message=str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
