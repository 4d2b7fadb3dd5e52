"""`geofed transfer SRC DST`: bulk data between nodes of a federation, checked and resumable.

    geofed transfer -f icm-task W1:/data/set G1:/scratch/set [--streams N] [--buffer BYTES]
    geofed transfer -f icm-task W1:mem:1000000000 G1:/dev/null       # the network and the ends only

On the testbed the two ends (geofed.ops.xfer_ends) run in their nodes' namespaces: the
receiver listens on its node's address (never on every address) and the sender opens
one control and N data connections to it, each proving a secret made for this transfer
(passed in the environment, never on a command line). Streams and socket buffers come
from the link's bandwidth-delay product unless given (docs/transfer.md).

A tree arrives with its metadata (docs/transfer.md says what is kept and what not); --delete
removes at the destination what the source no longer has, --dry-run says what would
be sent and deleted.

A transfer stopped in any way (Ctrl-C, a killed end, a dropped link) leaves a
NAME.geofed-partial and its manifest of verified chunks for each file of several chunks
still arriving (a file is renamed as soon as it is complete; a small file arrives whole
or is sent again); the same command again skips the files that arrived (same size and
mtime), and sends only the chunks that are missing or no longer verify.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from geofed import federation, validate
from geofed.errors import JobFailed, UserError
from geofed.ops import xfer_ends
from geofed.progress import Bar

# What one stream is given of the BDP when choosing the count: half the 8 MB window Linux
# autotunes a stream to here (tcp_rmem 16 MB). On icm-task (4.5 MB BDP) that is 2 streams,
# the fastest count measured (docs/transfer.md); one stream alone overshoots the one-BDP
# queue of the link and backs off more.
STREAM_WINDOW_BYTES = 4 << 20
MAX_STREAMS = 8
CONGESTION = ("auto", "cubic", "bbr")
# Cubic streams that the link's loss holds below this share of its rate (Mathis) leave
# the link to bbr, which paces at the bottleneck's rate it measures and does not back
# off on a random loss.
LOSS_BOUND_SHARE = 0.8
# Below this retransmitted share after slow start the streams lose too little for bbr to
# matter. Above it, the loss may still be cubic's own, its window overflowing the link's
# queue (0.08 % for one stream on a clean 2 ms, 1 Gb/s link): the sender switches only
# if the streams also deliver less than LOSS_BOUND_SHARE of the link.
MIN_SWITCH_LOSS = 1e-4


@dataclass(frozen=True)
class Choice:
    """How a transfer uses the route: streams, each socket's buffer, the congestion control
    the data streams start with, when the sender switches them to bbr (they retransmit more
    than switch_above of their bytes and deliver less than switch_below_Bps after slow
    start; 0: never), and why."""
    streams: int
    buffer: int
    bdp: int
    congestion: str
    switch_above: float
    switch_below_Bps: float
    reason: str


def parse_end(spec: str, fed, what: str) -> tuple[str, str]:
    node, sep, path = spec.partition(":")
    if not sep or not path:
        raise UserError(f"{what} {spec!r}: expected NODE:PATH, like W1:/data/file")
    check_node(fed, node, f"{what} {spec!r}")
    return node, path


def check_node(fed, node: str, what: str) -> None:
    try:
        fed.node(node)
    except KeyError:
        raise UserError(f"{what}: federation {fed.name} has no node {node} "
                        f"(nodes: {', '.join(n.name for n in fed.nodes())})") from None


def check_source(path: str, copy_links: bool) -> tuple[str, bool]:
    """The source as the sender takes it (a link named as the source is sent as a link
    unless copy_links, like rsync's), and whether it is a tree; a missing one is the
    user's mistake. Only the sender reads the tree (once)."""
    if path.startswith(xfer_ends.MEM_PREFIX):
        size = validate.parse_size(path[len(xfer_ends.MEM_PREFIX):], f"source {path}")
        return f"{xfer_ends.MEM_PREFIX}{size}", False
    if not (os.path.exists(path) if copy_links else os.path.lexists(path)):
        raise UserError(f"source {path}: no such file or directory")
    return os.path.abspath(path), os.path.isdir(path) and (copy_links or not os.path.islink(path))


def check_dest(path: str) -> str:
    """The destination, whose directory must exist; whether what is still to be written
    fits is the receiver's to say, once it has the plan."""
    if path == xfer_ends.NULL_SINK:
        return path
    p = Path(path)
    parent = p.parent if not p.is_dir() else p
    if not parent.is_dir():
        raise UserError(f"destination {path}: directory {parent} does not exist")
    return str(p.resolve())


def choose(fed, src_site: str, dst_site: str, streams: int | None = None, buffer: int | None = None,
           congestion: str = "auto") -> Choice:
    """Streams, buffers and congestion control for the route. Cubic: enough streams that each
    holds a share of the BDP a Linux stream keeps in flight, and on a lossy link enough that
    their Mathis limits add up to the link's rate (at most MAX_STREAMS). auto takes bbr
    where the model's loss would hold those cubic streams below LOSS_BOUND_SHARE of the
    rate, else cubic with a switch to bbr if after slow start the streams lose and stay
    below that share; bbr needs only the BDP's streams. Buffers: twice each stream's share
    of the BDP for cubic, autotuned (0) for bbr."""
    from geofed.model.network import route, stream_rate_Bps
    gbps, rtt = fed.bandwidth_gbps(src_site, dst_site), fed.rtt_ms(src_site, dst_site)
    bdp = federation.bdp_bytes(gbps, rtt) if gbps else 0
    r = route(fed, src_site, dst_site)
    for_bdp = max(1, min(MAX_STREAMS, math.ceil(bdp / STREAM_WINDOW_BYTES)))
    for_loss = math.ceil(r.rate_Bps / stream_rate_Bps(r, 1)) if r.loss and r.rate_Bps else 1
    cubic = streams or max(for_bdp, min(MAX_STREAMS, for_loss))
    switch_below = 0.0
    if congestion != "auto":
        algorithm, reason = congestion, f"asked (--congestion {congestion})"
    elif not r.rate_Bps:
        algorithm, reason = "cubic", "the link model has no rate to fill"
    else:
        want = LOSS_BOUND_SHARE * r.rate_Bps
        held = stream_rate_Bps(r, cubic)
        if held < want:
            algorithm = "bbr"
            reason = (f"the link model's loss ({r.loss:.3g}) holds {cubic} cubic streams to {held * 8e-6:.0f} Mb/s "
                      f"of {r.rate_Bps * 8e-6:.0f} (Mathis)")
        else:
            algorithm, switch_below = "cubic", want
            reason = (f"the link model's loss ({r.loss:.3g}) leaves {cubic} cubic streams the link; bbr if after "
                      f"slow start they retransmit more than {MIN_SWITCH_LOSS:.2%} of their bytes and deliver less "
                      f"than {want * 8e-6:.0f} Mb/s")
    n = streams or (for_bdp if algorithm == "bbr" else cubic)
    # bbr's buffers are autotuned: a fixed receive buffer of twice a stream's share of the BDP
    # held 2 bbr streams to 2400 Mb/s at 1 % loss (the holes of lost frames stall its window),
    # autotuned they moved 3310 (cubic's window never gets that far on a lossy link)
    buf = buffer if buffer is not None else (2 * bdp // n if bdp and algorithm == "cubic" else 0)
    return Choice(n, buf, bdp, algorithm, MIN_SWITCH_LOSS if switch_below else 0.0, switch_below, reason)


class End:
    """One end running in its node: its JSON lines, its exit status. An end started over ssh
    is given the secret on its standard input, kept open while it runs (it stops when
    that closes)."""

    def __init__(self, argv: list[str], env: dict, key: bytes, over_ssh: bool):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE if over_ssh else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env if over_ssh else dict(env, GEOFED_XFER_SECRET=key.hex()),
                                     start_new_session=True)
        if over_ssh:
            self.proc.stdin.write(key.hex() + "\n")
            self.proc.stdin.flush()
        self.events: list[dict] = []
        self.lock = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self.lock:
                self.events.append(ev)
                self.lock.notify_all()

    def wait_for(self, kind: str, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                found = next((e for e in self.events if e["event"] in (kind, "error")), None)
                left = deadline - time.monotonic()
                if found or self.proc.poll() is not None or left <= 0:
                    return found
                self.lock.wait(min(left, 0.2))

    def last(self, kind: str) -> dict | None:
        with self.lock:
            return next((e for e in reversed(self.events) if e["event"] == kind), None)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.proc.stdin:
            self.proc.stdin.close()


def end_argv(plan, node: str, args: list[str], caller: str | None, login: dict | None) -> list[str]:
    """An end on `node`: started by this command in the node's namespace, or from the
    caller's node over ssh as the testbed's user (its sshd checks the user's key), so the
    ends' control crosses the links from the caller and the data only the link between them."""
    from geofed.testbed import host, ssh
    argv = [sys.executable, "-m", "geofed.ops.xfer_ends", *args]
    if caller is None:
        return host.in_netns(plan.node(node).netns, argv)
    # the geofed the caller runs (a shared file system on the testbed; installed at each end on a cluster)
    here = str(Path(__file__).resolve().parents[2])
    remote = shlex.join(["env", f"PYTHONPATH={here}", *argv, "--ssh"])
    return ssh.login_argv(plan, login, ["ssh", node, remote], node=caller)


def run(fed, src: str, dst: str, *, streams: int | None = None, buffer: int | None = None,
        chunk: int | None = None, show=None, secret: bytes | None = None, copy_links: bool = False,
        delete: bool = False, dry_run: bool = False, congestion: str = "auto", caller: str | None = None) -> dict:
    """Move SRC to DST (NODE:PATH each) on the federation's testbed; the transfer's record
    data, or with dry_run what it would do: {"changes": [[what, path, ...]], "not_sent": [...]}.
    With `caller` (a node), the ends are started from that node over ssh (a third-party
    transfer when it is at neither end's site)."""
    from geofed.testbed import core
    src_node, src_path = parse_end(src, fed, "source")
    dst_node, dst_path = parse_end(dst, fed, "destination")
    source, tree = check_source(src_path, copy_links)
    if Path(dst_path).is_dir() and not tree:  # into the directory, by the source's name
        dst_path = str(Path(dst_path) / Path(source).name)
    dest = check_dest(dst_path)
    plan = core.require_up(fed, [fed.node(src_node), fed.node(dst_node)])
    login = None
    if caller is not None:
        from geofed.testbed import ssh
        check_node(fed, caller, f"--from {caller}")
        plan, login = ssh.require_up(fed)
    s_site, d_site = fed.node(src_node).site, fed.node(dst_node).site
    choice = choose(fed, s_site, d_site, streams, buffer, congestion)
    n, buf, bdp = choice.streams, choice.buffer, choice.bdp
    key, over_ssh = secret or secrets.token_bytes(32), caller is not None
    rx = End(end_argv(plan, dst_node, ["recv", "--bind", plan.node(dst_node).address, "--dest", dest,
                                       "--buffer", str(buf)] + ["--delete"] * delete, caller, login),
             dict(os.environ), key, over_ssh)
    tx = None
    try:
        listening = rx.wait_for("listening", 30)
        if not listening or listening["event"] != "listening":
            raise JobFailed(f"transfer: the receiver on {dst_node} did not start: {_why(rx)}")
        tx = End(end_argv(plan, src_node, [
            "send", "--connect", f"{plan.node(dst_node).address}:{listening['port']}", "--source", source,
            "--streams", str(n), "--chunk", str(chunk or 0), "--buffer", str(buf),
            "--congestion", choice.congestion, "--switch-above", repr(choice.switch_above),
            "--switch-below", repr(choice.switch_below_Bps)]
            + ["--copy-links"] * copy_links + ["--dry-run"] * dry_run, caller, login), dict(os.environ), key, over_ssh)
        bar = Bar(f"transfer {src} -> {dst}")
        while True:
            try:
                tx.proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                p = tx.last("progress")
                if p and show and p["bytes"]:
                    bar(p["acked"] / p["bytes"])
        bar.close()
        rx.proc.wait(timeout=30)
        for end in (tx, rx):
            end.reader.join(timeout=30)  # its last lines read: an end exits as soon as it has printed them
        sent, got, planned = tx.last("done"), rx.last("done"), tx.last("plan")
        if tx.proc.returncode == 2:  # the receiver refused the plan: what stands at the destination
            raise UserError(f"destination {dst}: {_why(tx)}")
        if dry_run and tx.proc.returncode == 0:
            return {"changes": tx.last("dry_run")["changes"], "not_sent": planned["not_sent"]}
        if tx.proc.returncode != 0 or not sent or not got:
            raise JobFailed(f"transfer {src} -> {dst} failed: {_why(tx) or _why(rx)}; {resume_hint(dest, tree)}")
    except KeyboardInterrupt:
        raise JobFailed(f"transfer {src} -> {dst} interrupted; {resume_hint(dest, tree)}", status=130) from None
    finally:
        for end in (tx, rx):
            if end is not None:
                end.stop()
    gb = max(sent["bytes"], 1) / 1e9
    return {"source": src, "destination": dst, "bytes": planned["bytes"], "moved_bytes": sent["bytes"], "held_bytes": sent["held"],
            "seconds": sent["seconds"], "rate_mbps": sent["bytes"] * 8 / sent["seconds"] / 1e6 if sent["seconds"] else 0,
            "streams": n, "buffer_bytes": buf, "chunk_bytes": planned["chunk"], "resent_chunks": sent["resent"],
            "corrupt_found": got["corrupt"],  # damaged on disk since verified, or arrived damaged
            "sender_cpu_s_per_gb": sent["cpu_s"] / gb, "receiver_cpu_s_per_gb": got["cpu_s"] / gb,
            "tree": planned["entries"] | {"deleted": sent["deleted"], "not_sent": len(planned["not_sent"])},
            "phases": {"plan_s": sent["plan_s"], "connect_s": sent["connect_s"], "data_s": sent["seconds"],
                       "finish_s": sent["finish_s"]},
            "link": {"src_site": s_site, "dst_site": d_site, "rtt_ms": fed.rtt_ms(s_site, d_site),
                     "bandwidth_gbps": fed.bandwidth_gbps(s_site, d_site), "bdp_bytes": bdp},
            "started_from": caller or "host",
            "congestion": congestion_used(choice, congestion, sent, tx.last("probe")),
            "limit": narrower_end(fed, s_site, d_site, sent, got)}


def congestion_used(choice: Choice, asked: str, sent: dict, probe: dict | None) -> dict:
    """The congestion control the data streams ran, as the kernel reported it on each, and why."""
    reason = choice.reason
    if probe:
        reason += (f"; measured {probe['retransmitted']:.3%} retransmitted and {probe['rate_Bps'] * 8e-6:.0f} Mb/s "
                   f"in {probe['seconds']:g} s after slow start: "
                   + ("switched to bbr" if probe["switched"] else "kept cubic"))
    algorithm = "bbr" if probe and probe["switched"] else choice.congestion
    return {"asked": asked, "algorithm": algorithm, "reason": reason, "sockets": sent["congestion"],
            "retransmitted": sent["retransmitted"],
            "probe": probe and {k: probe[k] for k in ("retransmitted", "rate_Bps", "switched")}}


def narrower_end(fed, s_site: str, d_site: str, sent: dict, got: dict) -> dict:
    """Which of the sender's disk, the receiver's disk, either end's CPU and the network held
    the transfer, from what each was doing during the data phase: the share of the streams'
    time spent reading (sender) or writing (receiver), each end's CPU seconds per second
    (a Python end's work runs mostly on one core), the rate against the link's TCP goodput,
    the share of the time the sender's sockets had data in flight that the receiver's
    window held them (the kernel's rwnd_limited: the receiver did not take the bytes as
    fast as the network brought them), the share of its streams' time each end spent
    blocked (the sender sending, the receiver waiting for bytes) and ready to run but
    waiting for a CPU, and the share of the bytes already waiting in the receiver's
    sockets when it came to read them. A sender held by the receiver's window half of that
    time or more names the receiver: its disk or its CPU, whichever was busier. Else the
    busiest end, if busy half of the time and more than the network's share. Else an end
    whose CPU others share, though its own CPU seconds be few: one whose streams were ready
    to run and waited for a CPU half of their time or more (the receiver only if bytes
    waited for it too), the longer waiting if both. Else the network."""
    from geofed.model.network import route
    wall = max(sent["seconds"], 1e-9)
    r = route(fed, s_site, d_site)
    goodput = r.rate_Bps * federation.TCP_PAYLOAD_PER_WIRE_BYTE * (1 - r.loss) * 8 / 1e6 if r.rate_Bps else None
    rate = sent["bytes"] * 8 / wall / 1e6
    rx_streams = max(got["streams"], 1)
    busy = {"sender disk": sent["read_s"] / (sent["streams"] * wall),
            "receiver disk": got["written_s"] / (rx_streams * wall),
            "sender CPU": sent["cpu_s"] / wall, "receiver CPU": got["cpu_s"] / wall}
    busy = {k: round(v, 3) for k, v in busy.items()}
    network = rate / goodput if goodput else 0.0
    behind = got.get("queued", 0) / got["bytes"] if got.get("bytes") else 0.0
    held = sent.get("rwnd_limited_s", 0.0) / sent["busy_s"] if sent.get("busy_s") else 0.0
    waiting = {"sender sending": sent["send_s"] / (sent["streams"] * wall),
               "receiver waiting": got["waited_s"] / (rx_streams * wall)}
    cpu_waiting = {"sender": sent.get("cpu_waited_s", 0.0) / (sent["streams"] * wall),
                   "receiver": got.get("cpu_waited_s", 0.0) / (rx_streams * wall)}
    end = max(busy, key=busy.get)
    if held >= 0.5:
        name = max(("receiver disk", "receiver CPU"), key=busy.get)
    elif busy[end] >= 0.5 and busy[end] > network:
        name = end
    elif starved := {e: v for e, v in cpu_waiting.items() if v >= 0.5 and (e == "sender" or behind >= 0.5)}:
        name = max(starved, key=starved.get) + " CPU"
    else:
        name = "network"
    return {"narrower": name, "busy": busy, "network": round(network, 3), "goodput_mbps": goodput,
            "rate_mbps": rate, "waiting": {k: round(v, 3) for k, v in waiting.items()},
            "receiver_window": round(held, 3), "receiver_behind": round(behind, 3),
            "waiting_for_cpu": {k: round(v, 3) for k, v in cpu_waiting.items()}}


def limit_line(data: dict) -> str:
    """The summary's line on the congestion control and the narrower end."""
    c, lim = data["congestion"], data["limit"]
    busy = ", ".join(f"{k} {v:.0%}" for k, v in lim["busy"].items())
    net = (f"the link: {lim['rate_mbps']:.0f} of {lim['goodput_mbps']:.0f} Mb/s of TCP goodput, {lim['network']:.0%}"
           if lim["goodput_mbps"] else f"the link: {lim['rate_mbps']:.0f} Mb/s")
    waiting = ", ".join(f"{k} {v:.0%}" for k, v in lim["waiting"].items())
    cpu = ", ".join(f"{k} {v:.0%}" for k, v in lim["waiting_for_cpu"].items())
    return (f"congestion control {c['algorithm']} (sockets: {', '.join(c['sockets'])}): {c['reason']}; "
            f"{c['retransmitted']:.2%} retransmitted\n"
            f"narrower end: {lim['narrower']} ({net}; busy: {busy}; the receiver's window held the sender "
            f"{lim['receiver_window']:.0%} of its sending time, bytes waiting for the receiver: "
            f"{lim['receiver_behind']:.0%}; streams blocked: {waiting}; streams waiting for a CPU: {cpu})")


def dry_run_table(preview: dict) -> str:
    """What a dry run found, one line per change (rsync -n's list), and a count."""
    lines = []
    for what, path, *more in preview["changes"]:
        arrow = {"link": "->", "hardlink": "=>"}.get(what)  # rsync's marks: a symbolic link, a hard link
        detail = f" ({more[0]} bytes)" if what == "send" else f" {arrow} {more[0]}" if arrow else ""
        lines.append(f"{what:<8} {path or '.'}{detail}")
    lines += [f"not sent {path} (not a file, directory or link)" for path in preview["not_sent"]]
    sends = [c for c in preview["changes"] if c[0] == "send"]
    lines.append(f"dry run: {len(sends)} file(s) to send, {sum(c[2] for c in sends) / 1e6:.1f} MB; "
                 f"{sum(c[0] == 'delete' for c in preview['changes'])} to delete; nothing changed")
    return "\n".join(lines)


def tree_line(tree: dict) -> str:
    return (f"files {tree['file']}, directories {tree['dir']}, symbolic links {tree['link']}, "
            f"hard links {tree['hardlink']}; deleted {tree['deleted']}"
            + (f"; devices, FIFOs or sockets not sent: {tree['not_sent']}" if tree["not_sent"] else ""))


def resume_hint(dest: str, tree: bool) -> str:
    if dest == xfer_ends.NULL_SINK:
        return "run the same command again to start over"
    kept = f"each file still arriving is kept as NAME{xfer_ends.PARTIAL} under {dest}" if tree \
        else f"{dest}{xfer_ends.PARTIAL} kept"
    return f"run the same command again to resume: it sends only what is missing ({kept})"


def _why(end: End) -> str:
    err = end.last("error")
    if err:
        return err["message"]
    if end.proc.poll() is not None and end.proc.returncode:
        tail = (end.proc.stderr.read() or "").strip().splitlines()
        return tail[-1] if tail else f"exit status {end.proc.returncode}"
    return ""
