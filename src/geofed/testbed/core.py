"""Bring a federation's testbed up, take it down, and say what is there."""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import statistics
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

from geofed.errors import UserError
from geofed.federation import TCP_PAYLOAD_PER_WIRE_BYTE, WIRE_FRAME_BYTES, Federation, Link
from geofed.native import binary
from geofed.testbed import host, probe, services
from geofed.testbed.plan import CPU_PERIOD_US, NETNS_PREFIX, RESOLV_CONF, STATE_ROOT, LinkPlan, Plan, make_plan, prefix

Progress = Callable[[str], None]
ETC_NETNS = Path("/etc/netns")
TCP_BUFFER_MIN = 16 * 1024 * 1024
GSO_FRAME_BYTES = 64 * 1024  # the largest frame a veth passes whole (GSO)
# What a qdisc counts for a full TCP GSO frame: its wire frames, each with its headers.
GSO_FRAME_ON_WIRE_BYTES = math.ceil(GSO_FRAME_BYTES / (WIRE_FRAME_BYTES * TCP_PAYLOAD_PER_WIRE_BYTE)) * WIRE_FRAME_BYTES
SHAPER_TIMER_SLACK_S = 200e-6  # how late tbf's watchdog runs on this host under load (see _shape)
# The emulator's two interfaces in a link namespace: site a's side and site b's side.
EMU_PORT_A, EMU_PORT_B = "port-a", "port-b"
FLOOR_SAMPLES = 200
# The floor is measured with a short hold, not none: a held frame goes through the
# emulator's sleep and wake-up, which a frame forwarded at once would skip.
FLOOR_HOLD_US = 100.0


def require_root(action: str) -> None:
    if os.geteuid() != 0:
        raise UserError(f"testbed {action}: needs root (network namespaces and cgroups); run it as root")


def _quiet(_msg: str) -> None:
    pass


def state_path(fed_name: str) -> Path:
    return services.fed_dir(fed_name) / "state.json"


def owner_path(fed_name: str) -> Path:
    return services.fed_dir(fed_name) / "owner.json"


def read_state(plan: Plan) -> dict | None:
    return host.read_json(state_path(plan.fed.name))


def write_state(plan: Plan, state: dict) -> None:
    host.write_json(state_path(plan.fed.name), state)


def read_owner(fed_name: str) -> dict | None:
    """Who brought the testbed up (user, pid, command, since); None when no one has."""
    return host.read_json(owner_path(fed_name))


def describe(owner: dict | None) -> str:
    if owner is None:
        return "an unknown command (no owner recorded)"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner["since"]))
    return f"{owner['user']} at {since} with `{owner['command']}` (pid {owner['pid']})"


def is_up(plan: Plan) -> bool:
    state = read_state(plan)
    if state is None or state.get("sha256") != plan.fed.sha256:
        return False
    present = set(host.netns_list())
    if not all(ns in present for ns in plan.namespaces()):
        return False
    return all(host.alive(e["pid"]) for e in state["emulators"].values())


def require_up(fed: Federation, nodes=None) -> Plan:
    """The one check before using a testbed: root, this very federation file up, the
    namespaces of `nodes` (default: all) present and every link emulator running."""
    from geofed import federation
    require_root("use")
    plan = make_plan(fed)
    state = read_state(plan)
    shipped = fed.name in federation.shipped_names() and federation.resolve(fed.name) == fed.path
    again = f"geofed testbed down {fed.name}; geofed testbed up {fed.name if shipped else fed.path}"
    if state is None:
        raise UserError(f"testbed {fed.name} is not up; run: geofed testbed up {fed.name if shipped else fed.path}")
    if state.get("sha256") != fed.sha256:
        raise UserError(f"testbed {fed.name} is up from another version of {fed.path}; run: {again}")
    present = set(host.netns_list())
    for node in plan.nodes if nodes is None else [plan.node(n.name) for n in nodes]:
        if node.netns not in present:
            raise UserError(f"node {node.node.name} of testbed {fed.name} is unreachable: namespace {node.netns} "
                            f"is gone; run: {again}")
    for ns in [s.netns for s in plan.sites] + [l.netns for l in plan.links]:
        if ns not in present:
            raise UserError(f"testbed {fed.name} is broken: namespace {ns} is gone; run: {again}")
    for name, emu in state["emulators"].items():
        if not host.alive(emu["pid"]):
            raise UserError(f"link {name} of testbed {fed.name} is down: its emulator (pid {emu['pid']}) is not "
                            f"running; run: {again}")
    return plan


def emulators_cpu_s(fed: Federation) -> float:
    """CPU seconds the testbed's link emulators have used so far: what forwarding the
    frames across its links has taken from the host's cores (up testbed)."""
    return sum(host.cpu_s(e["pid"]) for e in read_state(require_up(fed))["emulators"].values())


def link_tx_bytes(fed: Federation, src: str, dst: str) -> int | None:
    """Bytes the link emulator has delivered from site src towards dst so far (None: no direct link).

    Read from the emulator's egress port in its link namespace, so what is counted
    crossed the emulated link, headers included.
    """
    route = fed.route(src, dst)
    if len(route) != 1:
        return None
    lp = next(l for l in make_plan(fed).links if l.link is route[0])
    port = EMU_PORT_A if dst == lp.link.a else EMU_PORT_B
    res = host.ip("-j", "-s", "link", "show", "dev", port, netns=lp.netns)
    return int(json.loads(res.stdout)[0]["stats64"]["tx"]["bytes"])


def leftovers(fed_name: str) -> list[str]:
    """Namespaces of this federation's testbed that exist now."""
    return [ns for ns in host.netns_list() if ns.startswith(prefix(fed_name))]


def up(fed: Federation, progress: Progress = _quiet, own: bool = False) -> Plan:
    """Bring the testbed up, or leave it as it is when it is up already; with `own`, a
    testbed up already is refused (one line naming who brought it up): the caller takes
    down what it brings up, and only that."""
    require_root("up")
    plan = make_plan(fed)
    binary("geofed-linkemu"), binary("geofed-probe")  # fail before creating anything
    owner = read_owner(fed.name)
    if is_up(plan):
        if own:
            raise UserError(f"testbed {fed.name} is up already, brought up by {describe(owner)}; this command "
                            f"brings up its own and takes it down after: run it once that one is down "
                            f"(geofed testbed down {fed.name})")
        progress(f"testbed {fed.name} is already up (brought up by {describe(owner)})")
        return plan
    if owner and owner["pid"] != os.getpid() and host.alive(owner["pid"]):
        raise UserError(f"testbed {fed.name} is being brought up by {describe(owner)}; wait for it, or take it "
                        f"down: geofed testbed down {fed.name}")
    if leftovers(fed.name) or state_path(fed.name).exists() or owner:
        progress(f"removing a half-built testbed {fed.name} first")
        down(fed.name)
    _claim(fed.name)
    try:
        _build(plan, progress)
    except BaseException:
        # A half-done `up` (error or Ctrl-C) leaves nothing behind.
        down(fed.name)
        raise
    return plan


def _claim(fed_name: str) -> None:
    """Record this command as the testbed's owner; one that another claimed first is refused."""
    services.fed_dir(fed_name).mkdir(parents=True, exist_ok=True)
    try:
        with open(owner_path(fed_name), "x") as f:
            json.dump(services.caller(), f, indent=1)
    except FileExistsError:
        raise UserError(f"testbed {fed_name} is being brought up by {describe(read_owner(fed_name))}; wait for it, "
                        f"or take it down: geofed testbed down {fed_name}") from None


@contextmanager
def owned(fed: Federation, progress: Progress = _quiet) -> Iterator[Plan]:
    """A testbed brought up for the block and taken down after it, however it ends; one
    up already (someone else's) is refused and left as it is."""
    plan = up(fed, progress, own=True)
    try:
        yield plan
    finally:
        progress(f"taking testbed {fed.name} down")
        down(fed.name)


@contextmanager
def owned_copy(fed: Federation, tag: str, progress: Progress = _quiet, **link_changes) -> Iterator[Federation]:
    """A copy of `fed` under a name of our own (`tag`, its name, this process), with every
    link changed as asked (federation.derive), brought up for the block and taken down after
    it: a sweep or benchmark that needs a testbed of its own never touches a shipped one."""
    from geofed import federation
    with tempfile.TemporaryDirectory(prefix="geofed-copy-") as tmp:
        name = f"{tag}-{fed.name[:12]}-{os.getpid()}"[:32]
        copy = federation.load(federation.derive(fed, tmp, name, **link_changes))
        changed = "".join(f", link {k} {v:g}" for k, v in link_changes.items())
        progress(f"bringing up {copy.name} (a copy of {fed.name}{changed})")
        with owned(copy, progress):
            yield copy


def _build(plan: Plan, progress: Progress) -> None:
    progress(f"creating {len(plan.namespaces())} namespaces")
    for ns in plan.namespaces():
        host.ip("netns", "add", ns)
        host.sysctl(ns, "net.ipv6.conf.all.disable_ipv6", "1")
        host.sysctl(ns, "net.ipv6.conf.default.disable_ipv6", "1")
        host.ip("link", "set", "lo", "up", netns=ns)

    for s in plan.sites:
        host.ip("link", "add", "name", "br0", "type", "bridge", netns=s.netns)
        host.ip("addr", "add", f"{s.gateway}/24", "dev", "br0", netns=s.netns)
        host.ip("link", "set", "br0", "up", netns=s.netns)
        host.sysctl(s.netns, "net.ipv4.ip_forward", "1")

    tcp_max = max([TCP_BUFFER_MIN] + [2 * l.link.bdp_bytes for l in plan.links])
    site_ns = {s.code: s.netns for s in plan.sites}
    for n in plan.nodes:
        sns = site_ns[n.node.site]
        host.ip("link", "add", "name", n.site_port, "type", "veth", "peer", "name", "eth0", "netns", n.netns, netns=sns)
        host.ip("link", "set", n.site_port, "master", "br0", "up", netns=sns)
        host.ip("addr", "add", f"{n.address}/24", "dev", "eth0", netns=n.netns)
        host.ip("link", "set", "eth0", "up", netns=n.netns)
        # BBR (this host's default) paced a 1 MB ping-pong to twice its time over the
        # emulated link; cubic is what HPC sites run. A child namespace may not pick a
        # congestion control outside the host's allowed list, but a route may.
        subnet = n.gateway.rsplit(".", 1)[0] + ".0/24"
        host.ip("route", "replace", subnet, "dev", "eth0", "proto", "kernel", "scope", "link",
                "src", n.address, "congctl", "cubic", netns=n.netns)
        host.ip("route", "add", "default", "via", n.gateway, "congctl", "cubic", netns=n.netns)
        host.ip("route", "replace", "local", n.address, "dev", "eth0", "table", "local", "proto", "kernel",
                "scope", "host", "src", n.address, "congctl", "cubic", netns=n.netns)
        # Idle restarts would undo the window between iterations of a benchmark.
        host.sysctl(n.netns, "net.ipv4.tcp_slow_start_after_idle", "0")
        host.sysctl(n.netns, "net.ipv4.tcp_no_metrics_save", "1")
        host.sysctl(n.netns, "net.ipv4.tcp_rmem", f"4096 131072 {tcp_max}")
        host.sysctl(n.netns, "net.ipv4.tcp_wmem", f"4096 131072 {tcp_max}")
        host.sysctl(n.netns, "net.core.rmem_max", str(tcp_max), required=False)
        host.sysctl(n.netns, "net.core.wmem_max", str(tcp_max), required=False)
        if n.egress_gbps:
            # A node's interface is full duplex at its fabric's rate: shaped each way, so
            # a path is as narrow as both ends' interfaces (Federation.path_between).
            _shape(n.netns, "eth0", n.egress_gbps)
            _shape(sns, n.site_port, n.egress_gbps)
        hosts_dir = ETC_NETNS / n.netns
        hosts_dir.mkdir(parents=True, exist_ok=True)
        (hosts_dir / "hosts").write_text(plan.hosts_file(n, socket.gethostname()))
        (hosts_dir / "resolv.conf").write_text(RESOLV_CONF)
        host.cgroup_create(f"{plan.cgroup}/{n.node.name}", n.cpu_quota_us, CPU_PERIOD_US)

    for l in plan.links:
        a_ns, b_ns = site_ns[l.link.a], site_ns[l.link.b]
        host.ip("link", "add", "name", EMU_PORT_A, "type", "veth", "peer", "name", l.a_port, "netns", a_ns, netns=l.netns)
        host.ip("link", "add", "name", EMU_PORT_B, "type", "veth", "peer", "name", l.b_port, "netns", b_ns, netns=l.netns)
        for dev in (EMU_PORT_A, EMU_PORT_B):
            host.ip("link", "set", dev, "up", netns=l.netns)
        host.ip("addr", "add", f"{l.a_address}/24", "dev", l.a_port, netns=a_ns)
        host.ip("addr", "add", f"{l.b_address}/24", "dev", l.b_port, netns=b_ns)
        host.ip("link", "set", l.a_port, "up", netns=a_ns)
        host.ip("link", "set", l.b_port, "up", netns=b_ns)
    for s in plan.sites:
        for subnet, via, dev in s.routes:
            host.ip("route", "add", subnet, "via", via, "dev", dev, netns=s.netns)

    emulators = {}
    for l in plan.links:
        progress(f"starting the link emulator {l.link.name} ({l.link.rtt_ms:g} ms RTT, {l.link.bandwidth_gbps:g} Gb/s)")
        emu = _start_emulator(plan, l)
        emu.pop("proc")
        emulators[l.link.name] = emu
    write_state(plan, {
        "federation": str(plan.fed.path),
        "sha256": plan.fed.sha256,
        "created": time.time(),
        "emulators": emulators,
    })


def _shape(netns: str, dev: str, gbps: float) -> None:
    """Cap one way of a node's interface at its local fabric's rate with a token bucket
    (tbf: the kernel here has tbf and htb, no fq or netem).

    Whatever fits in the bucket leaves at veth speed, so the bucket is as small as
    holding the rate allows: one 64 KiB GSO frame as tbf counts it (every wire frame it
    stands for with its own headers: 69,644 bytes for TCP, not 65,536) and a wire frame
    (smaller, tbf cuts every super-frame into wire frames and the host's CPU does not keep
    up: until 2026-11-28 ma-hd's 2.6 Gb/s nodes had 67,050 bytes, and the link emulator
    and the nodes handled every wire frame alone, 5 x the CPU per MB of icm-task's), or
    what the rate brings in while the qdisc's watchdog timer is late (it runs in a soft
    interrupt, late by up to ~200 us on this loaded 2-core host: a smaller bucket
    overflows meanwhile and loses rate). It was 1 ms of the rate (624 KB at 5 Gb/s):
    messages up to that size left unshaped, at 0.29-0.52 of the model's time."""
    rate_bytes = gbps * 1e9 / 8
    burst = max(GSO_FRAME_ON_WIRE_BYTES + WIRE_FRAME_BYTES, int(rate_bytes * SHAPER_TIMER_SLACK_S))
    res = host.run_in(netns, ["tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                              "rate", f"{gbps * 1000:.0f}mbit", "burst", str(burst), "latency", "20ms"],
                      check=False)
    if res.returncode != 0:
        raise host.HostError(f"in {netns}: tc tbf on {dev}: {res.stderr.strip()}")


def _ways(l: LinkPlan, hold_us: float | None, changes: dict) -> list:
    """The link's two ways as the emulator runs them: as the federation has them with
    `changes` made to both, or holding each frame `hold_us` (the floor's measurement)."""
    ways = [replace(l.link.way(s), **changes) for s in (l.link.a, l.link.b)]
    if hold_us is not None:
        # The floor is the host's path: no fibre, and none of the link's randomness.
        ways = [replace(w, propagation_ms=hold_us / 1e3, jitter_us=0.0, loss=0.0, credits_bytes=None) for w in ways]
    return ways


def _emulator_argv(plan: Plan, l: LinkPlan, ways: list) -> list[str]:
    """The emulator of link `l` running its two ways (`_ways`)."""
    link = l.link

    def flags(w, prefix: str) -> list[str]:
        return [f"--{prefix}delay-us", f"{w.propagation_ms * 1e3:.3f}",
                f"--{prefix}rate-mbps", f"{w.bandwidth_gbps * 1000:.3f}", f"--{prefix}queue-bytes", str(w.queue_bytes),
                f"--{prefix}jitter-us", f"{w.jitter_us:.3f}", f"--{prefix}loss", f"{w.loss:.6f}",
                *([f"--{prefix}credits-bytes", str(w.credits_bytes)] if w.credits_bytes is not None else [])]
    return host.in_netns(l.netns, [
        binary("geofed-linkemu"), "--if-a", EMU_PORT_A, "--if-b", EMU_PORT_B,
        *flags(ways[0], ""), *(flags(ways[1], "back-") if ways[1] != ways[0] else []),
        "--seed", "1",
        # Idle vCPUs of a virtual machine take 50-150 us to wake; the emulator's PM QoS
        # request keeps them polling while it runs (and ends with it): at 1 ms RTT the
        # median error fell from -5.2 % to -0.8 % and p99 from +2.0 % to +1.4 %.
        "--cpu-dma-latency-us", "0",
        "--stats", f"{plan.state_dir}/link-{link.a}{link.b}.stats.json",
        "--control", control_path(plan, link),
    ])


def control_path(plan: Plan, link: Link) -> str:
    """The emulator's control socket, for live changes of its link (testbed/live.py)."""
    return f"{plan.state_dir}/link-{link.a}{link.b}.ctl"


def _start_emulator(plan: Plan, l: LinkPlan) -> dict:
    """Start the emulator holding every frame for the fibre's propagation, after measuring the floor.

    Physics, not feedback: the hold is the link's one-way propagation delay, counted
    from the kernel's receive stamp of each frame, so no frame of any protocol crosses
    faster than light in the fibre. What the host adds on top (veths, bridges, routing,
    packet sockets, waking CPUs) is measured as the floor: the probe's round trip over
    the same path with the emulator holding each frame FLOOR_HOLD_US, less those holds.
    Comparisons subtract it (docs/testbed.md, "The floor").
    """
    a = next(n for n in plan.nodes if n.node.site == l.link.a)
    b = next(n for n in plan.nodes if n.node.site == l.link.b)
    floor = _run_emulator(plan, l, FLOOR_HOLD_US)
    try:
        held, _lost = probe.rtt_samples_ms(a, b, count=FLOOR_SAMPLES)
    finally:
        _stop_emulator(floor)
    samples = [x - 2 * FLOOR_HOLD_US / 1e3 for x in held]
    emu = _run_emulator(plan, l, None)
    emu["floor"] = {"probe_rtt_ms": {"min": min(samples), "median": statistics.median(samples),
                                     "samples": len(samples)}}
    return emu


def _run_emulator(plan: Plan, l: LinkPlan, hold_us: float | None, **changes) -> dict:
    log = f"{plan.state_dir}/link-{l.link.a}{l.link.b}.log"
    ways = _ways(l, hold_us, changes)
    proc = host.spawn_ready(_emulator_argv(plan, l, ways), log)
    return {"pid": proc.pid, "delay_us": {s: w.propagation_ms * 1e3 for s, w in zip((l.link.a, l.link.b), ways)},
            "netns": l.netns, "proc": proc}


def _stop_emulator(emu: dict) -> None:
    host.terminate([emu["pid"]])
    emu["proc"].wait()


def restart_link(plan: Plan, link_name: str, hold_us: float | None = None, **changes) -> None:
    """Restart a running testbed's emulator of one link with a fixed hold both ways (the
    floor's MPI measurement), or with fields of both its ways changed (propagation_ms,
    bandwidth_gbps, loss, ...; none: as the federation has them). Live changes made before
    (testbed/live.py) are undone. The frames in flight and those that arrive while it
    restarts are lost: the gap goes into the state file (`restarts`), so that monitoring
    judges what it spoiled apart."""
    state = read_state(plan)
    l = next(x for x in plan.links if x.link.name == link_name)
    emu = state["emulators"][link_name]
    stopped = time.time()
    host.terminate([emu["pid"]])
    new = _run_emulator(plan, l, hold_us, **changes)
    emu.update(pid=new["pid"], delay_us=new["delay_us"])  # the process is the testbed's now, as at up
    emu.pop("ways", None)
    emu.setdefault("restarts", []).append({"stopped": stopped, "started": time.time(),
                                           "changes": changes if hold_us is None else {"hold_us": hold_us}})
    write_state(plan, state)


def restarts(plan: Plan, link_name: str) -> list[tuple[float, float]]:
    """(stopped, started) of every restart of a link's emulator since the testbed came up."""
    emu = (read_state(plan) or {"emulators": {}})["emulators"].get(link_name, {})
    return [(r["stopped"], r["started"]) for r in emu.get("restarts", [])]


def down(fed_name: str) -> list[str]:
    """Remove everything `up` made for this federation and every service started on it
    (testbed/services.py: Slurm, sshd, storage, directory servers, benchmark peers), also
    after a crash; harmless when nothing is there."""
    require_root("down")
    owner = read_owner(fed_name)
    removed = services.stop_all(fed_name)
    namespaces = leftovers(fed_name)
    pids = [p for ns in namespaces for p in host.netns_pids(ns)]
    if pids:
        host.terminate(pids)
        removed.append(f"{len(pids)} processes")
    for ns in namespaces:
        host.ip("netns", "del", ns, check=False)
    if namespaces:
        removed.append(f"{len(namespaces)} namespaces")
    cgroup = f"geofed/{fed_name}"
    if host.cpu_cgroup_dir(cgroup).exists():
        host.cgroup_remove_tree(cgroup)
        removed.append(f"cgroup {cgroup}")
    if ETC_NETNS.is_dir():
        for d in ETC_NETNS.iterdir():
            if d.name.startswith(prefix(fed_name)):
                shutil.rmtree(d, ignore_errors=True)
    if owner:  # MPICH segments of ranks killed while starting MPI, by a crash of their geofed say
        orphans = host.orphan_segments(owner["since"])
        for path in orphans:
            Path(path).unlink(missing_ok=True)
        if orphans:
            removed.append(f"{len(orphans)} MPICH segments")
    state_dir = services.fed_dir(fed_name)
    if state_dir.exists():
        shutil.rmtree(state_dir, ignore_errors=True)
        removed.append(str(state_dir))
    try:
        state_dir.parent.rmdir()
    except OSError:
        pass
    return removed


def testbeds() -> list[str]:
    """The federations with anything of theirs on this host: a state directory or a namespace."""
    root = Path(STATE_ROOT)
    names = {d.name for d in root.iterdir() if d.is_dir()} if root.is_dir() else set()
    return sorted(names | {ns.removeprefix(NETNS_PREFIX).split(".")[0] for ns in host.netns_list()
                           if ns.startswith(NETNS_PREFIX) and "." in ns})


def status(fed_name: str) -> dict:
    """What of a testbed exists now, by name: the federation file it was brought up from
    checks it whole; without that file, what the host shows."""
    state = host.read_json(state_path(fed_name)) or {"emulators": {}}
    fed = None
    if "federation" in state:
        from geofed import federation
        try:
            fed = federation.load(state["federation"])
        except UserError:
            pass  # its file is gone: what exists is still listed
    present = set(host.netns_list())
    out = {"federation": fed_name, "owner": read_owner(fed_name),
           "emulators": {name: dict(e, alive=host.alive(e["pid"])) for name, e in state["emulators"].items()},
           "changes": state.get("changes", []), "services": services.listing(fed_name)}
    if fed is not None and fed.name == fed_name:
        plan = make_plan(fed)
        cg = host.cpu_cgroup_dir(plan.cgroup)
        return out | {"up": is_up(plan), "namespaces": {ns: ns in present for ns in plan.namespaces()},
                      "cgroups": {n.node.name: (cg / n.node.name).exists() for n in plan.nodes}}
    mine = sorted(ns for ns in present if ns.startswith(prefix(fed_name)))
    alive = [e["alive"] for e in out["emulators"].values()]
    return out | {"up": bool(mine) and bool(alive) and all(alive), "namespaces": {ns: True for ns in mine},
                  "cgroups": {}}


def listing() -> list[dict]:
    """The status of every testbed on this host (see status)."""
    return [status(name) for name in testbeds()]


def format_listing(rows: list[dict]) -> str:
    """`geofed testbed list`: one line per federation: up or not, who brought it up and
    when, with which command, and its services (daemons running/started)."""
    if not rows:
        return "no testbed on this host"
    lines = [f"{'federation':<20} {'state':<6} {'brought up by':<14} {'since':<19} {'command':<40} services"]
    for r in rows:
        o = r["owner"]
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(o["since"])) if o else "-"
        state = "up" if r["up"] else ("down" if not r["namespaces"] else "broken")
        lines.append(f"{r['federation']:<20} {state:<6} {o['user'] if o else '-':<14} {since:<19} "
                     f"{o['command'] if o else '-':<40} {', '.join(services.summary(s) for s in r['services']) or '-'}")
    return "\n".join(lines)
