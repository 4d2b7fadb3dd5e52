"""The SimGrid peer: the same federation path simulated by SimGrid (Debian python3-simgrid).

Runs `simgrid_peer.py` with the system Python that Debian's module is built for; the
models compared are LV08 (SimGrid's default, with its latency and bandwidth
factors fitted to TCP on a LAN) and CM02 (plain latency + size / bandwidth).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from geofed.model.network import route

SYSTEM_PYTHON = "/usr/bin/python3"
NETWORK_MODELS = ("LV08", "CM02")
PEER = Path(__file__).with_name("simgrid_peer.py")


def available() -> str | None:
    """None when SimGrid can run here, else why not."""
    if not shutil.which(SYSTEM_PYTHON):
        return f"{SYSTEM_PYTHON} not found"
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import simgrid"], capture_output=True, text=True)
    if probe.returncode != 0:
        return "the system Python has no simgrid module (Debian package python3-simgrid; ./setup.sh installs it)"
    return None


def simulate(fed, cal, a: str, b: str, sizes: list[int], mode: str, window: int, model: str) -> dict[int, float]:
    """Simulated round time (s) per size: a ping-pong, or a window then a 1-byte ack."""
    r = route(fed, a, b, cal)
    spec = {"local_latency_s": cal.local_latency_s(a, 1) / 2, "local_Bps": cal.local_rate_Bps(a),
            "crosses": r.crosses_link, "link_latency_s": r.extra_one_way_s,
            "link_Bps": r.rate_Bps or cal.local_rate_Bps(a), "sizes": sizes, "window": window,
            "mode": mode, "model": model}
    with tempfile.TemporaryDirectory(prefix="geofed-simgrid-") as workdir:
        return _run(spec | {"workdir": workdir}, model)


def _run(spec: dict, model: str) -> dict[int, float]:
    # -P: the script's directory (geofed/model, with this simgrid.py) stays off sys.path
    done = subprocess.run([SYSTEM_PYTHON, "-P", str(PEER)], input=json.dumps(spec), capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"geofed: SimGrid {model} failed: {tail}", file=sys.stderr)
        return {}
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
