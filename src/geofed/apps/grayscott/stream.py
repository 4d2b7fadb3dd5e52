"""Staging through ADIOS2: a writer and a reader of step-wise fields, with checksums.

Every step carries `plane_crc`, the CRC32 of every plane (index along the first
axis) of every field, computed by the writer. A reader recomputes the CRCs of the
planes it read and compares them at once, so a corrupted step fails loudly where it
arrives; both sides also report a per-step digest (CRC32 of all plane CRCs) that
the workflow compares afterwards.

Transfer times are taken on the wall clock (time.time) that every process of one
host shares, the testbed's nodes included: the writer stamps when it hands a step
to SST (EndStep), a reader when it asked for the step and when its data was in
memory. A reader's own timer around Get/PerformGets is not a transfer time: SST
had already moved most of a step by the time BeginStep returned (4 MB "read" in
5 ms across a 9 ms RTT), so only the span from publication to arrival is.

SST is configured so that no step can be lost: the writer waits for all its
readers to connect (RendezvousReaderCount), keeps at most two steps queued and
blocks when the queue is full (QueueFullPolicy = Block); readers wait for a step
without a timeout. Data moves over SST's TCP ("WAN") transport, bound to the
node's testbed interface. The PyPI wheel has no MPI, so every writer or reader is
one process; parallel programs pick one rank to write (see simulation.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass

import numpy as np

from geofed import native, runtime
from geofed.apps.grayscott.model import split

QUEUE_LIMIT = 2


def plane_crcs(fields: list[np.ndarray]) -> np.ndarray:
    """CRC32 of every plane (first index) of every field: shape (fields, planes)."""
    out = np.empty((len(fields), fields[0].shape[0]), dtype=np.uint32)
    for i, f in enumerate(fields):
        f = np.ascontiguousarray(f)
        for p in range(f.shape[0]):
            out[i, p] = zlib.crc32(f[p].data)
    return out


def digest(crcs: np.ndarray) -> str:
    """One checksum for a step: the CRC32 of its plane CRCs, as 8 hex digits."""
    return f"{zlib.crc32(np.ascontiguousarray(crcs, dtype='<u4').data):08x}"


def interface() -> str | None:
    """The network interface a stream binds to: the node's testbed interface, or
    GEOFED_STREAM_INTERFACE on a real cluster (None: ADIOS2's own choice)."""
    if runtime.testbed():
        return "eth0"
    return os.environ.get("GEOFED_STREAM_INTERFACE") or None


SEED_FIX = "libgeofed_sstseed.so"


# glibc hands blocks over 32 MiB (a step at L = 128: 33.6 MB) to mmap and trims the heap
# once 2 blocks' worth is free, so every step's buffers came back as fresh pages: 9,000
# page faults per step in the writer, and a consumer spent about 40 % of its CPU zeroing them.
# Keeping freed memory for the next step took one SST stream to two consumers from 52 to
# 70 % of the link (bench/grayscott_fanout.py, docs/grayscott.md).
KEEP_STEP_BUFFERS = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824"


def preload_argv() -> list[str]:
    """The prefix that starts an SST process: EVPath's seed fix preloaded (sstseed.c),
    freed step buffers kept for the next step, one BLAS thread.

    Without the seed fix, two processes whose pid + time agree when they open a stream
    get the same EVPath connection-manager ID, and a third one mixes up their connections.
    OpenBLAS's idle threads spin on the cores the stream needs; no part here calls BLAS
    on large matrices.
    """
    tunables = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), KEEP_STEP_BUFFERS]))
    return ["env", f"LD_PRELOAD={native.library(SEED_FIX)}", f"GLIBC_TUNABLES={tunables}", "OPENBLAS_NUM_THREADS=1"]


def _params(engine: str, extra: dict[str, str]) -> dict[str, str]:
    if engine != "SST":
        return dict(extra)
    # Speculative preload off on both sides (it is decided per reader: AUTO turns it on
    # for every one-rank consumer). It would push the whole step to a reader before it
    # asks: wasted on readers of a share of the planes, and it hides the transfer inside
    # the wait for the step. Its message handler was also one of the two places where
    # ADIOS2 2.12's EVPath data plane crashed our consumers (docs/grayscott.md).
    p = {"DataTransport": "WAN", "SpeculativePreloadMode": "OFF"}
    nic = interface()
    if nic:
        p.update(NetworkInterface=nic, ControlInterface=nic)
    p.update(extra)
    return p


def drop_read_profile(path: str) -> None:
    """Remove the profile ADIOS2's BP5 reader writes at Close, unasked and whatever its
    parameters say, to /tmp/<file name>_<pid in hex>_profiling.json: this process's own
    litter, named exactly (ADIOS2 2.12, BP5Reader::FlushProfiler)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(f"/tmp/{os.path.basename(os.path.normpath(path))}_{os.getpid():x}_profiling.json")


def bindings():
    """adios2's low-level Python bindings, imported where first needed."""
    import adios2.bindings as ab
    return ab


class ConnectTimeout(RuntimeError):
    pass


@dataclass
class Written:
    step: int
    stage_s: float  # BeginStep to EndStep: time the writer was held by staging
    published: float  # wall clock at EndStep: the step handed to the stream
    bytes: int
    digest: str


class Writer:
    """Writes `fields` (same first dimension, checksummed per plane), `extras` and the step number."""

    def __init__(self, path: str, engine: str, readers: int, fields: dict[str, tuple[int, ...]],
                 connect_timeout_s: float, describe: str = "stream", extras: dict[str, tuple[int, ...]] | None = None,
                 params: dict[str, str] | None = None):
        ab = bindings()
        self.ab = ab
        self.adios = ab.ADIOS()
        self.io = self.adios.DeclareIO(f"write-{os.getpid()}")
        self.io.SetEngine(engine)
        extra = {}
        if engine == "SST":
            extra = {"RendezvousReaderCount": str(readers), "QueueLimit": str(QUEUE_LIMIT), "QueueFullPolicy": "Block"}
        self.io.SetParameters(_params(engine, {**extra, **(params or {})}))
        self.names = list(fields)
        self.vars = {}
        for name, shape in fields.items():
            self.vars[name] = self.io.DefineVariable(name, np.zeros(1), list(shape), [0] * len(shape), list(shape),
                                                     ab.ConstantDims)
        self.extras = {name: self.io.DefineVariable(name, np.zeros(1), list(shape), [0] * len(shape), list(shape),
                                                    ab.ConstantDims) for name, shape in (extras or {}).items()}
        n = next(iter(fields.values()))[0]
        self.crc_var = self.io.DefineVariable("plane_crc", np.zeros(1, dtype=np.uint32), [len(fields), n], [0, 0],
                                              [len(fields), n], ab.ConstantDims)
        self.step_var = self.io.DefineVariable("step", np.zeros(1, dtype=np.int64))
        # SST's Open waits for RendezvousReaderCount readers and has no timeout of
        # its own (OpenTimeoutSecs is the readers'): a watchdog turns "nobody came"
        # into an error instead of a hang.
        with watchdog(connect_timeout_s, f"{describe}: no consumer connected to stream {path} within "
                      f"{connect_timeout_s:g} s (waiting for {readers}); is every consumer running and able "
                      f"to reach this node?"):
            self.engine = self.io.Open(path, ab.Mode.Write)

    def write(self, step: int, arrays: dict[str, np.ndarray]) -> Written:
        fields = [np.ascontiguousarray(arrays[n]) for n in self.names]
        crcs = plane_crcs(fields)
        t0 = time.perf_counter()
        self.engine.BeginStep()
        self.engine.Put(self.step_var, np.array([step], dtype=np.int64), self.ab.Mode.Sync)
        for name, f in zip(self.names, fields):
            self.engine.Put(self.vars[name], f, self.ab.Mode.Sync)
        for name, var in self.extras.items():
            self.engine.Put(var, np.ascontiguousarray(arrays[name]), self.ab.Mode.Sync)
        self.engine.Put(self.crc_var, crcs, self.ab.Mode.Sync)
        published = time.time()
        self.engine.EndStep()
        return Written(step, time.perf_counter() - t0, published, sum(f.nbytes for f in fields), digest(crcs))

    def close(self) -> None:
        self.engine.Close()


@contextlib.contextmanager
def watchdog(seconds: float, message: str):
    """Stop this process with `message` unless the block finishes within `seconds`.

    A separate process waits on a pipe: ADIOS2's Open holds the GIL, so neither a
    Python thread nor a signal handler would run before it returns. It is started
    with subprocess (vfork and exec), not os.fork: forking this MPI process with
    ADIOS2's threads running crashed it with SIGSEGV in fork (seen in CI). On
    timeout it prints the message and sends SIGTERM; the block's end closes the pipe.
    """
    guard = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(seconds), message],
                             stdin=subprocess.PIPE)
    try:
        yield
    finally:
        guard.stdin.close()
        guard.wait()


# On timeout it also removes the MPICH shared-memory files the process had mapped:
# a process ended by a signal does not finalise MPI and would leave them in /dev/shm.
_WATCHDOG = """
import os, select, signal, sys
ready, _, _ = select.select([sys.stdin], [], [], float(sys.argv[2]))
if not ready:
    sys.stderr.write(sys.argv[3] + "\\n")
    sys.stderr.flush()
    pid = int(sys.argv[1])
    try:
        with open(f"/proc/{pid}/maps") as f:
            shm = {l.split(maxsplit=5)[-1].strip() for l in f if "/dev/shm/mpich" in l}
    except OSError:
        shm = set()
    os.kill(pid, signal.SIGTERM)
    for path in shm:
        try:
            os.unlink(path.removesuffix(" (deleted)"))
        except OSError:
            pass
"""


@dataclass
class Received:
    step: int
    lo: int  # first plane held
    arrays: dict[str, np.ndarray]  # planes [lo, lo + n) of every field, and the extras
    crcs: np.ndarray  # recomputed here, shape (fields, hi - lo)
    wait_s: float  # in BeginStep: waiting for the step (and, in SST, most of its data)
    asked: float  # wall clock when this reader called BeginStep
    arrived: float  # wall clock when the step's data was in memory (PerformGets returned)
    bytes: int


class CorruptStep(RuntimeError):
    pass


class Reader:
    """Reads a share of the planes of `fields` (and whole `extras`) from every step, in order.

    Extras (small side arrays such as histogram bins) are outside the plane CRCs.
    """

    def __init__(self, path: str, engine: str, fields: list[str], open_timeout_s: float, describe: str = "reader",
                 extras: tuple[str, ...] = (), params: dict[str, str] | None = None):
        ab = bindings()
        self.ab = ab
        self.describe = describe
        self.path = path
        self.kind = engine
        self.adios = ab.ADIOS()
        self.io = self.adios.DeclareIO(f"read-{os.getpid()}")
        self.io.SetEngine(engine)
        # BP5 waits for a file that is not there yet (a writer may be about to create it): bounded too.
        extra = {"OpenTimeoutSecs": str(int(max(1, open_timeout_s))), **(params or {})}
        self.io.SetParameters(_params(engine, extra))
        self.names = fields
        self.extras = extras
        try:
            self.engine = self.io.Open(path, ab.Mode.Read)
        except Exception as e:  # ADIOS2 raises plain exceptions; name the stream and the cause
            cause = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()  # ADIOS2 colours its messages
            raise ConnectTimeout(f"{describe}: cannot open stream {path} within {open_timeout_s:g} s: {cause}") from None

    def shape(self, name: str) -> list[int]:
        return self.io.InquireVariable(name).Shape()

    def steps(self, part: tuple[int, int] = (0, 1)):
        """Every step, in order; this reader takes part `index` of `count` of the planes."""
        ab = self.ab
        index, count = part
        while True:
            asked = time.time()
            status = self.engine.BeginStep(ab.StepMode.Read, -1.0)
            wait = time.time() - asked
            if status == ab.StepStatus.EndOfStream:
                return
            if status != ab.StepStatus.OK:
                raise RuntimeError(f"{self.describe}: stream {self.path}: BeginStep returned {status}")
            step = np.zeros(1, dtype=np.int64)
            self.engine.Get(self.io.InquireVariable("step"), step, ab.Mode.Deferred)
            arrays = {}
            for name in self.names:
                var = self.io.InquireVariable(name)
                shape = var.Shape()
                a, n = split(shape[0], count, index)
                b = a + n
                var.SetSelection([[a] + [0] * (len(shape) - 1), [b - a] + list(shape[1:])])
                arrays[name] = np.empty([b - a] + list(shape[1:]))
                self.engine.Get(var, arrays[name], ab.Mode.Deferred)
            for name in self.extras:
                var = self.io.InquireVariable(name)
                arrays[name] = np.empty(var.Shape())
                self.engine.Get(var, arrays[name], ab.Mode.Deferred)
            crc_var = self.io.InquireVariable("plane_crc")
            sent = np.empty(crc_var.Shape(), dtype=np.uint32)
            self.engine.Get(crc_var, sent, ab.Mode.Deferred)
            self.engine.PerformGets()
            arrived = time.time()
            self.engine.EndStep()
            crcs = plane_crcs([arrays[n] for n in self.names])
            if not np.array_equal(crcs, sent[:, a:a + crcs.shape[1]]):
                bad = [self.names[i] for i in range(len(self.names)) if not np.array_equal(crcs[i], sent[i, a:a + crcs.shape[1]])]
                raise CorruptStep(f"{self.describe}: step {int(step[0])} of {self.path} arrived corrupted "
                                  f"(CRC mismatch in {', '.join(bad)})")
            yield Received(int(step[0]), a, arrays, crcs, wait, asked, arrived, sum(x.nbytes for x in arrays.values()))

    def close(self) -> None:
        self.engine.Close()
        if self.kind == "BP5":
            drop_read_profile(self.path)
