"""A light one-way delay and loss probe (OWAMP's idea): a sender stamps UDP datagrams
with the time it sends them, a receiver subtracts that from the time they arrive.

    python -m geofed.ops.owd receive --bind IP      (prints `port N`, then a line per datagram,
                                                     and the time alone while nothing arrives)
    python -m geofed.ops.owd send --to IP:PORT --rate HZ   (prints a line per datagram sent)

The two clocks are CLOCK_REALTIME of the two hosts, so a delay is only as good as
their agreement: each datagram carries its sender's boot id and the sender clock's
maximum error (adjtimex's maxerror, what NTP/chrony keep current); the receiver
states the bound of each delay: 0 when both ends read one kernel's clock (every
namespace of a testbed), the sum of both maximum errors otherwise, and none
(unknown) when either clock is not synchronised. The monitor (ops/monitor_serve.py)
reads both ends' lines: what was sent and never received in time is lost.
"""

from __future__ import annotations

import argparse
import ctypes
import socket
import struct
import sys
import time
from pathlib import Path

# seq, send time (ns, CLOCK_REALTIME), the sender clock's maximum error (ns, -1: not
# synchronised), the sender's boot id (which kernel's clock stamped it)
PACKET = struct.Struct("!Qqq16s")
TIME_ERROR = 5  # adjtimex's return when the clock is not synchronised
TIMEX_BYTES = 256  # struct timex is 208 bytes on x86_64 and arm64; room to spare
MAXERROR_OFFSET = 24  # after `unsigned modes` (padded to 8), `long offset`, `long freq`
SO_TIMESTAMPNS = 35  # Linux's; Python's socket module does not name it
SO_RCVBUFFORCE = 33  # Linux's: root's receive buffer beyond net.core.rmem_max
IDLE_S = 0.2  # a receiver with nothing arriving says so this often
RCVBUF_BYTES = 4 << 20


def boot_id() -> bytes:
    return bytes.fromhex(Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", ""))


def clock_maxerror_ns() -> int:
    """The kernel's bound on this clock's error (adjtimex, read only), -1 when the clock
    is not synchronised (nothing bounds it)."""
    timex = ctypes.create_string_buffer(TIMEX_BYTES)  # modes = 0: read, change nothing
    state = ctypes.CDLL(None, use_errno=True).adjtimex(timex)
    if state < 0 or state == TIME_ERROR:
        return -1
    return struct.unpack_from("l", timex, MAXERROR_OFFSET)[0] * 1000  # microseconds in the kernel


def error_bound_ns(sender_boot: bytes, sender_err: int, own_boot: bytes, own_err: int) -> int:
    """The bound of a one-way delay measured between two clocks (-1: unknown)."""
    if sender_boot == own_boot:
        return 0
    if sender_err < 0 or own_err < 0:
        return -1
    return sender_err + own_err


def send(to: str, rate_hz: float, size: int) -> None:
    ip, port = to.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    me = boot_id()
    pad = b"\0" * max(0, size - PACKET.size)
    interval = 1 / rate_hz
    err, err_read = clock_maxerror_ns(), time.monotonic()
    seq, start = 0, time.monotonic()
    while True:
        if time.monotonic() - err_read > 1:  # the bound grows between NTP updates
            err, err_read = clock_maxerror_ns(), time.monotonic()
        now = time.time_ns()
        try:
            sock.sendto(PACKET.pack(seq, now, err, me) + pad, (ip, int(port)))
        except OSError:
            pass  # no route while a link is down: the datagram is lost, as on the wire
        print(seq, now, flush=True)
        seq += 1
        # The schedule, not a synchronisation: datagrams leave at a fixed rate.
        time.sleep(max(0.0, start + seq * interval - time.monotonic()))


def receive(bind: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # the kernel's arrival stamp
    # A busy host may leave the receiver unscheduled for a moment: the kernel keeps what
    # arrives meanwhile (at 1000 datagrams a second, seconds of them) instead of losing it.
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)  # up to net.core.rmem_max
    sock.bind((bind, 0))
    print("port", sock.getsockname()[1], flush=True)
    me = boot_id()
    err, err_read = clock_maxerror_ns(), time.monotonic()
    stamp = struct.Struct("qq")
    sock.settimeout(IDLE_S)
    while True:
        try:
            data, anc, _flags, _addr = sock.recvmsg(2048, socket.CMSG_SPACE(stamp.size))
        except TimeoutError:
            print(time.time_ns(), flush=True)  # nothing arrived: all that did before now is told
            continue
        arrived = next((s * 10**9 + ns for level, kind, raw in anc
                        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS
                        for s, ns in [stamp.unpack(raw[:stamp.size])]), time.time_ns())
        if len(data) < PACKET.size:
            continue  # not ours
        if time.monotonic() - err_read > 1:
            err, err_read = clock_maxerror_ns(), time.monotonic()
        seq, sent, sender_err, sender_boot = PACKET.unpack_from(data)
        print(seq, sent, arrived, error_bound_ns(sender_boot, sender_err, me, err), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="geofed.ops.owd", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="role", required=True)
    r = sub.add_parser("receive")
    r.add_argument("--bind", required=True)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--rate", type=float, required=True, help="datagrams per second")
    s.add_argument("--size", type=int, default=64)
    args = ap.parse_args(argv)
    try:
        if args.role == "send":
            send(args.to, args.rate, args.size)
        else:
            receive(args.bind)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0  # the monitor went away or stopped us
    return 0


if __name__ == "__main__":
    sys.exit(main())
