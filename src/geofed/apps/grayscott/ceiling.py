"""The network's ceiling for staging: a step's bytes over plain TCP between the staging's nodes.

A writer at the simulation's writer node publishes a step of `nbytes` at fixed instants
on the host's common clock and sends it to each reader, a connection per reader, when
the reader asks, as SST serves a step on request; the readers run on the consumers'
nodes. Nothing but the bytes is done with the step (no copy, no checksum), so this is
what the network and the nodes' TCP carry for the same pattern. Per step, as the
workflow's `link_mbps` (workflow.step_table): all readers' bytes over the time from
publication until the last reader had the step.

`run` starts the roles in the nodes' network namespaces and CPU cgroups (the workflow's
parts run under those quotas too); `python -m geofed.apps.grayscott.ceiling --role ...`
is one role.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from geofed.errors import JobFailed

PORT = 47311
CONNECT_S = 30.0
START_AFTER_S = 3.0  # every reader has connected by then


def at_slot(start: float, gap: float, k: int) -> None:
    """Wait for step k's moment on the host's common clock (the simulation's compute between outputs)."""
    time.sleep(max(0.0, start + (k + 1) * gap - time.time()))


def writer(address: str, readers: int, nbytes: int, steps: int, gap: float, start: float) -> list[float]:
    """Serve `steps` steps to `readers` connections; the publication time of each step."""
    payload = memoryview(os.urandom(nbytes))
    with socket.create_server((address, PORT)) as srv:
        conns = [srv.accept()[0] for _ in range(readers)]
    published = []
    try:
        for k in range(steps):
            at_slot(start, gap, k)
            published.append(time.time())
            for c in conns:  # each reader is waiting for the step: tell it, it asks
                c.sendall(k.to_bytes(4, "little"))
            for c in conns:
                if c.recv(1) != b"?":
                    raise ConnectionError(f"step {k}: a reader went away before asking")
            senders = [threading.Thread(target=c.sendall, args=(payload,)) for c in conns]
            for t in senders:
                t.start()
            for t in senders:
                t.join()
    finally:
        for c in conns:
            c.close()
    return published


def reader(address: str, nbytes: int, steps: int) -> list[tuple[int, float, int]]:
    """(step, arrival time, bytes) of every step read whole from the writer at `address`."""
    deadline = time.time() + CONNECT_S
    while True:
        try:
            c = socket.create_connection((address, PORT))
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)  # the writer's node has not started listening yet
    view = memoryview(bytearray(nbytes))
    rows = []
    with c:
        for _ in range(steps):
            step = int.from_bytes(c.recv(4, socket.MSG_WAITALL), "little")
            c.sendall(b"?")
            got = 0
            while got < nbytes:
                n = c.recv_into(view[got:])
                if not n:
                    raise ConnectionError(f"step {step}: the writer closed after {got} of {nbytes} bytes")
                got += n
            rows.append((step, time.time(), got))
    return rows


def summarise(published: list[float], got: list[list[tuple[int, float, int]]]) -> dict:
    """Per step, every reader's bytes over publication to the last arrival, as the workflow's link_mbps."""
    per_step = []
    for rows in zip(*got):
        step = rows[0][0]
        delivery = max(a for _, a, _ in rows) - published[step]
        per_step.append({"step": step, "delivery_s": delivery,
                         "mbps": sum(n for _, _, n in rows) * 8 / delivery / 1e6})
    return {"steps": per_step, "median_mbps": statistics.median(s["mbps"] for s in per_step),
            "median_delivery_s": statistics.median(s["delivery_s"] for s in per_step)}


def run(plan, writer_node: str, reader_nodes: list[str], nbytes: int, steps: int, gap: float,
        workdir: Path, timeout: float = 600.0) -> dict:
    """Writer at `writer_node`, a reader at each of `reader_nodes`, each in its node's namespace and
    CPU cgroup; the summary (per-step rates, medians)."""
    from geofed.testbed import host
    w = plan.node(writer_node)
    start = time.time() + START_AFTER_S
    common = ["--address", w.address, "--nbytes", str(nbytes), "--steps", str(steps)]
    roles = [(writer_node, ["--role", "writer", "--readers", str(len(reader_nodes)), "--gap", str(gap),
                            "--start", str(start)])]
    roles += [(n, ["--role", "reader"]) for n in reader_nodes]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    procs = []
    try:
        for i, (node, argv) in enumerate(roles):
            out = workdir / f"ceiling-{i}.json"
            # Into the node's cgroup before `ip netns exec`, which remounts /sys without the cgroups.
            procs.append((subprocess.Popen(host.in_netns(plan.node(node).netns, [
                sys.executable, "-m", "geofed.apps.grayscott.ceiling", *common, *argv, "--out", str(out)]), env=env,
                preexec_fn=functools.partial(host.cgroup_join, f"{plan.cgroup}/{node}", 0)), out))
        codes = [p.wait(timeout=timeout) for p, _ in procs]
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(codes):
        raise JobFailed(f"plain-TCP ceiling: a part failed (exit statuses {codes}; writer, readers)")
    results = [json.loads(out.read_text()) for _, out in procs]
    return summarise(results[0], results[1:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=("writer", "reader"), required=True)
    ap.add_argument("--address", required=True, help="the writer's address")
    ap.add_argument("--nbytes", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--readers", type=int, default=1)
    ap.add_argument("--gap", type=float, default=1.0, help="seconds between publications")
    ap.add_argument("--start", type=float, default=0.0, help="the common clock's zero for the publications")
    ap.add_argument("--out", required=True, help="JSON written at the end")
    a = ap.parse_args(argv)
    result = (writer(a.address, a.readers, a.nbytes, a.steps, a.gap, a.start) if a.role == "writer"
              else reader(a.address, a.nbytes, a.steps))
    Path(a.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
