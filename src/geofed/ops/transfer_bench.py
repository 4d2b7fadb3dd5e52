"""`geofed bench transfer`: geofed transfer beside iperf3, GridFTP and xrootd on the same link.

On a private copy of the federation (its own name, brought up and taken down here; its
link's round trip and rate changed with --rtt-ms and --bandwidth-gbps), for each link
loss and stream count: `geofed transfer` moving bytes made in memory to /dev/null (the
network and the ends, no disk), its congestion control chosen as the command chooses it;
iperf3 (Debian's, the network's ceiling: the same bytes over as many TCP streams,
nothing checked) with the testbed's cubic, and again with bbr (`-C bbr`: what plain TCP
does with the same congestion control as geofed's on a lossy link); and the bulk tools
centres use, from Debian, with their default congestion control (cubic, as a centre
runs them): GridFTP (globus-url-copy -p N to a globus-gridftp-server) and xrootd (xrdcp
--streams N from an xrootd server), each reading a file of the same size in /dev/shm
and writing /dev/null. --repeat runs each, interleaved so that all see the same
machine; medians. The servers (iperf3's, GridFTP's, xrootd's) run as this command's
foreground children, a service of the private testbed (testbed/services.py) with their
own configuration under its run directory: stopped when the command ends, or by
`geofed testbed down` after a crash. GridFTP's and xrootd's rates are the size
over their client's run time less that of a 1-byte copy (their connection set-up);
geofed's and iperf3's are their own. CPU seconds per GB at the sender: geofed's from
getrusage of its sender, iperf3's from its own host CPU share x time, GridFTP's from
getrusage of globus-url-copy (the client pushes), xrootd's from its server's
/proc/PID/stat (xrdcp pulls from it), each less that of the 1-byte copy; at the receiver,
geofed's and iperf3's (its server's share, which iperf3 reports as remote).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import subprocess
import time
from pathlib import Path

from geofed.progress import progress


GRIDFTP_PORT, XROOTD_PORT, IPERF3_PORT = 2811, 1094, 5299
PEERS = ("gridftp", "xrootd")
SERVICE = "bench-peers"


def iperf3(plan, src: str, dst: str, streams: int, nbytes: int, timeout: float = 300,
           congestion: str | None = None) -> dict:
    """One iperf3 run: `streams` TCP streams moving `nbytes` from node src to the server at dst,
    with the testbed's congestion control (cubic) or `congestion`."""
    from geofed.testbed import host
    d, s = plan.node(dst), plan.node(src)
    done = subprocess.run(host.in_netns(s.netns, ["iperf3", "-c", d.address, "-p", str(IPERF3_PORT), "-J",
                                                  "-P", str(streams), "-n", str(nbytes)]
                                        + (["-C", congestion] if congestion else [])),
                          capture_output=True, text=True, timeout=timeout)
    doc = json.loads(done.stdout or "{}")
    if "end" not in doc or doc.get("error"):
        raise RuntimeError(f"iperf3: {doc.get('error') or done.stderr.strip()}")
    end = doc["end"]
    seconds = end["sum_received"]["seconds"]
    moved = end["sum_received"]["bytes"]
    cpu = end["cpu_utilization_percent"]  # the client's (host) and the server's (remote) CPU share of the run
    return {"rate_mbps": moved * 8 / seconds / 1e6,
            "sender_cpu_s_per_gb": cpu["host_total"] / 100 * seconds / (moved / 1e9),
            "receiver_cpu_s_per_gb": cpu["remote_total"] / 100 * seconds / (moved / 1e9),
            "retransmits": end["sum_sent"].get("retransmits", 0)}


@contextlib.contextmanager
def shm_file(nbytes: int, needed):
    """A file of `nbytes` random bytes in /dev/shm (memory, like geofed's mem: source), removed on leaving."""
    if not needed:
        yield None
        return
    path = Path(f"/dev/shm/geofed-xferbench-{os.getpid()}.bin")
    try:
        with open(path, "wb") as f:
            for left in range(nbytes, 0, -(1 << 24)):
                f.write(os.urandom(min(left, 1 << 24)))
        yield path
    finally:
        path.unlink(missing_ok=True)


def link_source(source: Path, data: Path) -> None:
    """The file and a 1-byte one where the peers' servers and clients look for them."""
    for name, target in (("data.bin", source), ("tiny.bin", None)):
        p = data / name
        if p.exists() or p.is_symlink():
            continue
        if target is None:
            p.write_bytes(b"x")
        else:
            p.symlink_to(target)


@contextlib.contextmanager
def peer_servers(plan, src: str, dst: str, peers, source: Path | None):
    """iperf3's and GridFTP's servers at dst (clients at src push to /dev/null there) and
    xrootd's at src exporting `source` (clients at dst pull it), each ready once it
    listens; stopped on leaving. Yields (the directory xrootd exports, its pid)."""
    from geofed.testbed import host, services
    s, d = plan.node(src), plan.node(dst)

    def listening(node, port):
        return lambda: host.listening(node.netns, port)

    def start(svc: services.Service) -> None:
        svc.start(services.Daemon("iperf3", host.in_netns(d.netns, ["iperf3", "-s", "-B", d.address, "-p",
                                                                   str(IPERF3_PORT)]),
                                  listening(d, IPERF3_PORT), d.netns, 10.0, grace_s=2.0))
        if "gridftp" in peers:
            svc.start(services.Daemon("gridftp", host.in_netns(d.netns, [
                "globus-gridftp-server", "-aa", "-anonymous-user", "nobody", "-anonymous-group", "nogroup",
                "-p", str(GRIDFTP_PORT), "-control-interface", d.address, "-data-interface", d.address]),
                listening(d, GRIDFTP_PORT), d.netns, 10.0, grace_s=2.0))
        if "xrootd" in peers:
            xrd = svc.dir / "xrootd"
            for sub in ("admin", "log", "data"):
                (xrd / sub).mkdir(parents=True)
            os.chown(xrd / "admin", 65534, 65534)  # xrootd runs as nobody
            os.chown(xrd / "log", 65534, 65534)
            link_source(source, xrd / "data")
            (xrd / "xrd.cfg").write_text(f"all.export /\noss.localroot {xrd / 'data'}\n"
                                         f"all.adminpath {xrd / 'admin'}\nxrd.port {XROOTD_PORT}\n")
            svc.start(services.Daemon("xrootd", host.in_netns(s.netns, [
                "xrootd", "-c", str(xrd / "xrd.cfg"), "-R", "nobody", "-l", str(xrd / "log" / "xrootd.log")]),
                listening(s, XROOTD_PORT), s.netns, 10.0, grace_s=2.0))
    state = services.up(plan.fed.name, SERVICE, start)
    try:
        # ip netns exec execs: the daemon's pid is xrootd's own
        yield services.service_dir(plan.fed.name, SERVICE) / "xrootd" / "data", \
            state["daemons"]["xrootd"]["pid"] if "xrootd" in peers else 0
    finally:
        services.stop(plan.fed.name, SERVICE)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def children_cpu_s() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(argv: list[str], timeout: float, what: str) -> tuple[float, float]:
    """(seconds, CPU seconds) of a client run to its end."""
    t0, c0 = time.perf_counter(), children_cpu_s()
    # xrdcp retries a refused connection for up to 30 minutes by default: once is enough here
    env = dict(os.environ, XRD_CONNECTIONRETRY="1", XRD_CONNECTIONWINDOW="5")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{what}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return time.perf_counter() - t0, children_cpu_s() - c0


def peer_copy(plan, tool: str, src: str, dst: str, streams: int, data: Path, name: str,
              timeout: float = 300) -> tuple[float, float]:
    """(Seconds, client CPU seconds) `tool` takes to copy data/name from node src to
    /dev/null at node dst."""
    from geofed.testbed import host
    s, d = plan.node(src), plan.node(dst)
    if tool == "gridftp":
        argv = host.in_netns(s.netns, ["globus-url-copy", "-p", str(streams), "-tcp-bs", "4M", f"file://{data / name}",
                                       f"ftp://{d.address}:{GRIDFTP_PORT}/dev/null"])
    else:
        argv = host.in_netns(d.netns, ["xrdcp", "--nopbar", "-f", "--streams", str(streams),
                                       f"root://{s.address}:{XROOTD_PORT}//{name}", "/dev/null"])
    return _timed(argv, timeout, tool)


def peer_run(plan, tool: str, src: str, dst: str, streams: int, data: Path, xrootd_pid: int, nbytes: int) -> dict:
    """The copy's rate and sender CPU per GB without its set-up: the 1-byte copy's time
    and CPU taken off. The sender is GridFTP's client and xrootd's server."""
    def copy(name: str) -> tuple[float, float]:
        server0 = process_cpu_s(xrootd_pid)
        seconds, client_cpu = peer_copy(plan, tool, src, dst, streams, data, name)
        return seconds, client_cpu if tool == "gridftp" else process_cpu_s(xrootd_pid) - server0
    (tiny_s, tiny_cpu), (big_s, big_cpu) = copy("tiny.bin"), copy("data.bin")
    return {"rate_mbps": nbytes * 8 / max(big_s - tiny_s, 1e-6) / 1e6,
            "sender_cpu_s_per_gb": max(big_cpu - tiny_cpu, 0.0) / (nbytes / 1e9)}


def run(base, streams: list[int], losses: list[float], nbytes: int, repeat: int, lossy_bytes: int,
        peers: list[str] | tuple[str, ...] = PEERS, **link_changes) -> dict:
    """The table's rows. geofed (its congestion control chosen as `geofed transfer` does)
    and iperf3 with bbr move `nbytes` per run at every loss; the tools with the testbed's
    cubic move `lossy_bytes` per run on a lossy link (a cubic stream there runs at Mathis'
    limit, 15 Mb/s at 9 ms and 1 %, so a GB would take minutes). `link_changes` (rtt_ms,
    bandwidth_gbps) derive the copy's link from the federation's."""
    from geofed.ops import transfer
    from geofed.testbed import core
    rows, choices = [], {}
    for loss in losses:
        with core.owned_copy(base, "gfxfer", loss=loss, **link_changes) as fed:
            plan = core.make_plan(fed)
            a, b = (next(n.name for n in fed.nodes() if n.site == s.code) for s in fed.sites[:2])
            cubic_size = nbytes if loss == 0 else lossy_bytes
            with shm_file(cubic_size, peers) as source, peer_servers(plan, a, b, peers, source) as served:
                rows += [_row(fed, plan, a, b, n, nbytes, cubic_size, repeat, peers, served) | {"loss": loss}
                         for n in streams]
            auto = transfer.choose(fed, fed.sites[0].code, fed.sites[1].code)
            choices[f"{loss:g}"] = {"streams": auto.streams, "congestion": auto.congestion, "reason": auto.reason}
            link = fed.links[0]
    # the path is as narrow as its narrowest hop: the link, or the nodes' interfaces (5.6 Gb/s on icm-task)
    path_gbps = fed.path_between(fed.sites[0].code, fed.sites[1].code).bandwidth_gbps
    return {"link": {"rtt_ms": link.rtt_ms, "bandwidth_gbps": link.bandwidth_gbps, "path_gbps": path_gbps},
            "auto_streams": auto.streams,
            "auto": choices, "peers": list(peers), "rows": rows}


def _row(fed, plan, a: str, b: str, n: int, size: int, cubic_size: int, repeat: int, peers, served) -> dict:
    from geofed.ops import transfer
    ours, theirs, bbr, others = [], [], [], {p: [] for p in peers}
    for k in range(repeat):
        progress(f"bench transfer: {fed.links[0].loss:g} loss, {n} stream(s), run {k + 1}/{repeat}")
        ours.append(transfer.run(fed, f"{a}:mem:{size}", f"{b}:/dev/null", streams=n))
        theirs.append(iperf3(plan, a, b, n, cubic_size))
        bbr.append(iperf3(plan, a, b, n, size, congestion="bbr"))
        for p in peers:
            others[p].append(peer_run(plan, p, a, b, n, *served, cubic_size))
    tools = {"iperf3": theirs, "iperf3_bbr": bbr, **others}
    return {"streams": n, "bytes": size, "cubic_bytes": cubic_size, "repeat": repeat,
            "geofed_mbps": statistics.median(r["rate_mbps"] for r in ours),
            "geofed_runs_mbps": [r["rate_mbps"] for r in ours],
            "geofed_sender_cpu_s_per_gb": statistics.median(r["sender_cpu_s_per_gb"] for r in ours),
            "geofed_receiver_cpu_s_per_gb": statistics.median(r["receiver_cpu_s_per_gb"] for r in ours),
            "geofed_buffer_bytes": ours[0]["buffer_bytes"],
            "geofed_congestion": sorted({r["congestion"]["algorithm"] for r in ours}),
            "geofed_sockets": sorted({c for r in ours for c in r["congestion"]["sockets"]}),
            "geofed_retransmitted": statistics.median(r["congestion"]["retransmitted"] for r in ours),
            "geofed_narrower": [r["limit"]["narrower"] for r in ours],
            "iperf3_retransmits": statistics.median(r["retransmits"] for r in theirs),
            **{f"{p}_mbps": statistics.median(r["rate_mbps"] for r in v) for p, v in tools.items()},
            **{f"{p}_runs_mbps": [r["rate_mbps"] for r in v] for p, v in tools.items()},
            **{f"{p}_sender_cpu_s_per_gb": statistics.median(r["sender_cpu_s_per_gb"] for r in v)
               for p, v in tools.items()},
            **{f"{p}_receiver_cpu_s_per_gb": statistics.median(r["receiver_cpu_s_per_gb"] for r in tools[p])
               for p in ("iperf3", "iperf3_bbr")}}


def goodput_ceiling_mbps(gbps: float, loss: float) -> float:
    """What TCP can carry over the link: its rate less headers (1448 payload bytes a frame)
    and the frames lost, which are sent again."""
    from geofed.federation import TCP_PAYLOAD_PER_WIRE_BYTE
    return gbps * 1000 * TCP_PAYLOAD_PER_WIRE_BYTE * (1 - loss)


def best(data: dict) -> list[dict]:
    """Per loss: each tool's best median over the stream counts, and geofed's against the
    link's goodput ceiling, the best plain TCP measured (iperf3, cubic or bbr) and each peer."""
    out = []
    for loss in sorted({r["loss"] for r in data["rows"]}):
        rows = [r for r in data["rows"] if r["loss"] == loss]
        tools = ["geofed", "iperf3", "iperf3_bbr", *data.get("peers", [])]
        top = {t: max(rows, key=lambda r: r.get(t + "_mbps", 0)) for t in tools if t + "_mbps" in rows[0]}
        link = data["link"]
        ceiling = goodput_ceiling_mbps(min(link["bandwidth_gbps"], link.get("path_gbps") or math.inf), loss)
        measured = max(top[t][t + "_mbps"] for t in ("iperf3", "iperf3_bbr") if t in top)
        ours = top["geofed"]["geofed_mbps"]
        out.append({"loss": loss, "ceiling_mbps": ceiling, "measured_ceiling_mbps": measured,
                    "best": {t: {"mbps": r[t + "_mbps"], "streams": r["streams"]} for t, r in top.items()},
                    "geofed_of_ceiling": ours / ceiling, "geofed_of_measured": ours / measured,
                    "geofed_over": {t: ours / top[t][t + "_mbps"] for t in top if t != "geofed"}})
    return out


def table(data: dict) -> str:
    link = data["link"]
    cap = link["bandwidth_gbps"] * 1000
    peers = data.get("peers", [])
    lossy = next((r for r in data["rows"] if r["loss"]), None)
    lines = [f"link {link['rtt_ms']:.4g} ms RTT, {cap:.0f} Mb/s; memory -> /dev/null "
             f"({data['rows'][0]['bytes'] / 1e6:.0f} MB per run" + (f"; with loss, {lossy['cubic_bytes'] / 1e6:.0f} MB for the tools with cubic" if lossy else "")
             + f"); medians of {data['rows'][0]['repeat']}",
             *(f"geofed's own choice at loss {loss}: {c['streams']} streams, {c['congestion']} ({c['reason']})"
               for loss, c in data.get("auto", {}).items()),
             f"{'loss':>6} {'streams':>7} {'geofed Mb/s':>11} {'cc':>5} {'of link':>7} {'iperf3 Mb/s':>11} "
             f"{'geofed/iperf3':>13} {'iperf3 bbr':>10}" + "".join(f" {p + ' Mb/s':>12}" for p in peers)
             + f" {'CPU s/GB geofed':>15} {'iperf3':>7}" + "".join(f" {p:>7}" for p in peers)
             + f" {'receiver geofed':>15} {'iperf3':>7}"]
    for r in data["rows"]:
        lines.append(f"{r['loss']:>6g} {r['streams']:>7} {r['geofed_mbps']:>11.0f} "
                     f"{'/'.join(r.get('geofed_congestion', ['cubic'])):>5} {r['geofed_mbps'] / cap:>7.1%} "
                     f"{r['iperf3_mbps']:>11.0f} {r['geofed_mbps'] / r['iperf3_mbps']:>13.3f} "
                     f"{r.get('iperf3_bbr_mbps', float('nan')):>10.0f}"
                     + "".join(f" {r[p + '_mbps']:>12.0f}" for p in peers)
                     + f" {r['geofed_sender_cpu_s_per_gb']:>15.2f} {r['iperf3_sender_cpu_s_per_gb']:>7.2f}"
                     + "".join(f" {r.get(p + '_sender_cpu_s_per_gb', float('nan')):>7.2f}" for p in peers)
                     + f" {r.get('geofed_receiver_cpu_s_per_gb', float('nan')):>15.2f}"
                     f" {r.get('iperf3_receiver_cpu_s_per_gb', float('nan')):>7.2f}")
    if "iperf3_bbr_mbps" in data["rows"][0]:
        for b in best(data):
            tops = ", ".join(f"{t} {v['mbps']:.0f} ({v['streams']})" for t, v in b["best"].items())
            lines.append(f"loss {b['loss']:g}, best (streams): {tops}; geofed {b['geofed_of_ceiling']:.1%} of the "
                         f"path's TCP goodput ({b['ceiling_mbps']:.0f} Mb/s), {b['geofed_of_measured']:.1%} of the "
                         f"best plain TCP measured ({b['measured_ceiling_mbps']:.0f})")
    return "\n".join(lines)
