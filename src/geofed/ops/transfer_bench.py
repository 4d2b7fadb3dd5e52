"""`geofed bench transfer`: geofed transfer beside iperf3 on the same link, streams and loss.

On a private copy of the federation (its own name, brought up and taken down here),
for each link loss and stream count: `geofed transfer` moving bytes made in memory to
/dev/null (the network and the ends, no disk) and iperf3 (Debian's, the network's
ceiling: the same bytes over as many TCP streams, nothing checked), --repeat times each,
interleaved so that both see the same machine. Medians; CPU seconds per GB at the
sender (geofed: getrusage of its sender; iperf3: its own host CPU share x time).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile

from geofed import federation, records
from geofed.progress import progress


def iperf3(plan, src: str, dst: str, streams: int, nbytes: int, timeout: float = 300) -> dict:
    """One iperf3 run: `streams` TCP streams moving `nbytes` from node src to node dst."""
    from geofed.testbed import host
    d, s = plan.node(dst), plan.node(src)
    server = subprocess.Popen(host.in_netns(d.netns, ["iperf3", "-s", "-1", "-B", d.address, "-p", "5299"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):  # the server listens within a moment; the client retries until it does
            done = subprocess.run(host.in_netns(s.netns, ["iperf3", "-c", d.address, "-p", "5299", "-J",
                                                          "-P", str(streams), "-n", str(nbytes)]),
                                  capture_output=True, text=True, timeout=timeout)
            doc = json.loads(done.stdout or "{}")
            if "end" in doc and not doc.get("error"):
                break
            if "unable to connect" not in str(doc.get("error", "")):
                raise RuntimeError(f"iperf3: {doc.get('error') or done.stderr.strip()}")
        else:
            raise RuntimeError("iperf3: the server never listened")
    finally:
        server.kill()
        server.wait()
    end = doc["end"]
    seconds = end["sum_received"]["seconds"]
    moved = end["sum_received"]["bytes"]
    cpu = end["cpu_utilization_percent"]["host_total"] / 100 * seconds
    return {"rate_mbps": moved * 8 / seconds / 1e6, "sender_cpu_s_per_gb": cpu / (moved / 1e9),
            "retransmits": end["sum_sent"].get("retransmits", 0)}


def run(base, streams: list[int], losses: list[float], nbytes: int, repeat: int, lossy_bytes: int) -> dict:
    """The table's rows; a lossy link moves `lossy_bytes` per run (a stream there runs at
    Mathis' limit, 15 Mb/s at 9 ms and 1 %, so a GB would take minutes)."""
    from geofed.ops import transfer
    from geofed.testbed import core
    rows = []
    for loss in losses:
        with tempfile.TemporaryDirectory(prefix="geofed-xferbench-") as tmp:
            fed = federation.load(federation.derive(base, tmp, "xferbench", loss=loss))
            plan = core.up(fed)
            try:
                a, b = (next(n.name for n in fed.nodes() if n.site == s.code) for s in fed.sites[:2])
                for n in streams:
                    ours, theirs = [], []
                    size = nbytes if loss == 0 else lossy_bytes
                    for k in range(repeat):
                        progress(f"bench transfer: loss {loss:g}, {n} stream(s), run {k + 1}/{repeat}")
                        ours.append(transfer.run(fed, f"{a}:mem:{size}", f"{b}:/dev/null", streams=n))
                        theirs.append(iperf3(plan, a, b, n, size))
                    rows.append({
                        "loss": loss, "streams": n, "bytes": size, "repeat": repeat,
                        "geofed_mbps": statistics.median(r["rate_mbps"] for r in ours),
                        "geofed_runs_mbps": [r["rate_mbps"] for r in ours],
                        "geofed_sender_cpu_s_per_gb": statistics.median(r["sender_cpu_s_per_gb"] for r in ours),
                        "geofed_receiver_cpu_s_per_gb": statistics.median(r["receiver_cpu_s_per_gb"] for r in ours),
                        "geofed_buffer_bytes": ours[0]["buffer_bytes"],
                        "iperf3_mbps": statistics.median(r["rate_mbps"] for r in theirs),
                        "iperf3_runs_mbps": [r["rate_mbps"] for r in theirs],
                        "iperf3_sender_cpu_s_per_gb": statistics.median(r["sender_cpu_s_per_gb"] for r in theirs),
                        "iperf3_retransmits": statistics.median(r["retransmits"] for r in theirs),
                    })
                auto = transfer.choose(fed, fed.sites[0].code, fed.sites[1].code, None, None)[0]
            finally:
                core.down(fed.name)
    link = base.links[0]
    return {"link": {"rtt_ms": link.rtt_ms, "bandwidth_gbps": link.bandwidth_gbps}, "auto_streams": auto,
            "rows": rows}


def table(data: dict) -> str:
    link = data["link"]
    cap = link["bandwidth_gbps"] * 1000
    lines = [f"link {link['rtt_ms']:.4g} ms RTT, {cap:.0f} Mb/s; memory -> /dev/null ({data['rows'][0]['bytes'] / 1e6:.0f} MB "
             f"per run, {data['rows'][-1]['bytes'] / 1e6:.0f} MB with loss); medians of "
             f"{data['rows'][0]['repeat']}; geofed's own choice: {data['auto_streams']} streams",
             f"{'loss':>6} {'streams':>7} {'geofed Mb/s':>11} {'of link':>7} {'iperf3 Mb/s':>11} {'geofed/iperf3':>13}"
             f" {'CPU s/GB geofed':>15} {'iperf3':>7}"]
    for r in data["rows"]:
        lines.append(f"{r['loss']:>6g} {r['streams']:>7} {r['geofed_mbps']:>11.0f} {r['geofed_mbps'] / cap:>7.1%} "
                     f"{r['iperf3_mbps']:>11.0f} {r['geofed_mbps'] / r['iperf3_mbps']:>13.3f} "
                     f"{r['geofed_sender_cpu_s_per_gb']:>15.2f} {r['iperf3_sender_cpu_s_per_gb']:>7.2f}")
    return "\n".join(lines)


def losses(text: str) -> list[float]:
    """--loss: frame loss probabilities separated by commas."""
    import argparse
    from geofed.validate import probability
    values = [probability(x) for x in text.split(",") if x.strip()]
    if not values or any(v >= 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected losses below 1 separated by commas, like 0,0.01, got {text!r}")
    return values


def cmd_bench_transfer(args) -> int:
    from geofed.errors import UserError
    from geofed.ops.transfer import parse_size
    base = federation.load(args.federation)
    if len(base.sites) < 2:
        raise UserError(f"{base.path}: one site only; a transfer between sites needs two")
    data = run(base, args.streams, args.loss, parse_size(args.size, "--size"), args.repeat,
               parse_size(args.lossy_size, "--lossy-size"))
    print(table(data))
    print(f"record: {records.save(records.make('bench.transfer', data, **records.federation_meta(base)), args.out)}")
    return 0


def register(bench) -> None:
    from geofed.validate import positive_int, positive_int_list
    p = bench.add_parser("transfer", help="geofed transfer beside iperf3: rate and CPU per stream count and loss (root)")
    p.add_argument("-f", "--federation", default="icm-task", help="federation to copy (default icm-task)")
    p.add_argument("--streams", type=positive_int_list, default=[1, 2, 4, 8], help="stream counts (default 1,2,4,8)")
    p.add_argument("--loss", type=losses, default=[0.0, 0.01], help="link losses (default 0,0.01)")
    p.add_argument("--size", default="1G", help="bytes per run (default 1G)")
    p.add_argument("--lossy-size", default="64M", help="bytes per run on a lossy link (default 64M)")
    p.add_argument("--repeat", type=positive_int, default=3, help="runs per cell; medians (default 3)")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the bench.transfer record")
    p.set_defaults(func=cmd_bench_transfer)

