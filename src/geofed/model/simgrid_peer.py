"""SimGrid's prediction of a ping-pong and a bandwidth window: run by the system Python.

Debian's python3-simgrid is built for /usr/bin/python3, not for geofed's venv, so
geofed runs this file as a script there: platform and sizes as JSON on stdin, one
JSON line of simulated one-way times (s) out. It imports nothing of geofed.

The platform is the same federation path geofed's own model sees: two hosts joined
by the local path (the measured one-site latency and rate: the host's floor) and the
long-haul link (the federation's one-way delay and rate).
"""

import json
import os
import sys


def platform_xml(p: dict) -> str:
    links = [("local_a", p["local_latency_s"], p["local_Bps"]), ("local_b", p["local_latency_s"], p["local_Bps"])]
    if p["crosses"]:
        links.insert(1, ("longhaul", p["link_latency_s"], p["link_Bps"]))
    body = "".join(f'<link id="{n}" bandwidth="{bw}Bps" latency="{lat}s"/>' for n, lat, bw in links)
    route = "".join(f'<link_ctn id="{n}"/>' for n, _, _ in links)
    return ('<?xml version="1.0"?><!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">'
            '<platform version="4.1"><zone id="fed" routing="Full">'
            '<host id="a" speed="1Gf"/><host id="b" speed="1Gf"/>'
            f'{body}<route src="a" dst="b">{route}</route></zone></platform>')


def main() -> None:
    # Here, not at the top: the venv imports this module too (the model registry reads
    # every module of geofed.model), and only the system Python has simgrid.
    import simgrid
    p = json.load(sys.stdin)
    out = {}
    plat = os.path.join(p["workdir"], "platform.xml")  # the caller's temporary directory: gone even if we abort
    with open(plat, "w") as f:
        f.write(platform_xml(p))
    e = simgrid.Engine(["geofed", f"--cfg=network/model:{p['model']}", "--log=root.thres:critical"])
    e.load_platform(plat)

    def ping():  # one size after another: the models keep no state between messages
        box, back = simgrid.Mailbox.by_name("ping"), simgrid.Mailbox.by_name("pong")
        for size in p["sizes"]:
            t0 = simgrid.Engine.clock
            sends = [box.put_async("m", size) for _ in range(p["window"])]  # a window in flight, as OSU bw
            for s in sends:
                s.wait()
            back.get()
            out[str(size)] = simgrid.Engine.clock - t0

    def pong():
        box, back = simgrid.Mailbox.by_name("ping"), simgrid.Mailbox.by_name("pong")
        box.set_receiver(simgrid.Actor.self())  # eager: a window's messages flow before each get
        for size in p["sizes"]:
            for _ in range(p["window"]):
                box.get()
            back.put("reply", size if p["mode"] == "pingpong" else 1)

    simgrid.Actor.create("ping", e.host_by_name("a"), ping)
    simgrid.Actor.create("pong", e.host_by_name("b"), pong)
    e.run()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
