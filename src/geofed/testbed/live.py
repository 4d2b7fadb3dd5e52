"""Live changes of a running link (`geofed testbed set`): sent to the link's emulator over
its control socket, applied there without a restart and without losing or reordering a
frame in flight, and recorded with their time in the testbed's state, where monitoring
and reports find them (`changes`) beside each way's settings now (docs/testbed.md,
"Live changes")."""

from __future__ import annotations

import fcntl
import json
import math
import socket
import time
import tomllib
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

from geofed import federation
from geofed.errors import UserError
from geofed.federation import Federation, Link
from geofed.testbed import core
from geofed.testbed.plan import Plan

# What `testbed set` changes, per way, in the federation file's words and units. Every
# delay is the fibre's one-way propagation in the end (what the emulator holds a frame):
# `delay_ms` is it, `fibre_km` its length, `rtt_ms` the round trip as the file means it.
KEYS = {
    "delay_ms": "one-way propagation (ms)",
    "fibre_km": "the fibre's length (km); sets delay_ms",
    "rtt_ms": "round trip node to node (ms), both ways; sets delay_ms",
    "bandwidth_gbps": "rate (Gb/s)",
    "queue_bytes": "queue in front of the wire (bytes)",
    "jitter_us": "uniform extra delay per frame, up to (us)",
    "loss": "probability a frame is lost on the wire",
    "credits_bytes": "a credit link's window (bytes)",
    "down": "true: the fibre is cut, every frame is lost; false: it is back",
}
# The state's settings of a way, and the emulator's flag of each (with a unit factor).
FLAGS = {"delay_ms": ("delay-us", 1e3), "bandwidth_gbps": ("rate-mbps", 1e3), "queue_bytes": ("queue-bytes", 1),
         "jitter_us": ("jitter-us", 1), "loss": ("loss", 1), "credits_bytes": ("credits-bytes", 1), "down": ("down", 1)}
REPLY_TIMEOUT_S = 5.0

Progress = Callable[[str], None]


def find_link(fed: Federation, name: str) -> Link:
    """The link `name` (`M-H`, either order)."""
    for link in fed.links:
        if name in (link.name, f"{link.b}-{link.a}"):
            return link
    known = ", ".join(l.name for l in fed.links) or "none"
    raise UserError(f"link {name!r}: not a link of federation {fed.name} (links: {known})")


def way_name(link: Link, src: str) -> str:
    return f"{src}->{link.b if src == link.a else link.a}"


def file_settings(link: Link) -> dict[str, dict]:
    """Each way's settings as the federation file gives them, by the site it leaves."""
    return {src: {"delay_ms": w.propagation_ms, "bandwidth_gbps": w.bandwidth_gbps, "queue_bytes": w.queue_bytes,
                  "jitter_us": w.jitter_us, "loss": w.loss, "credits_bytes": w.credits_bytes, "down": False}
            for src in (link.a, link.b) for w in [link.way(src)]}


def settings(state: dict, link: Link) -> dict[str, dict]:
    """Each way's settings now: the file's, as changed since `up`."""
    return state["emulators"][link.name].get("ways") or file_settings(link)


def parse(link: Link, assignments: dict[str, object], from_site: str | None) -> dict[str, dict]:
    """`key=value` settings -> the state's settings they change, per way they apply to
    (`from_site`'s way, or both); refused in one line naming the key and the link."""
    where = f"link {link.name}"
    if from_site is not None and from_site not in (link.a, link.b):
        raise UserError(f"--from {from_site}: link {link.name} leaves {link.a} or {link.b}")
    if not assignments:
        raise UserError(f"{where}: nothing to change; give KEY=VALUE (keys: {', '.join(KEYS)})")
    local_one_way_ms = link.one_way_ms - link.propagation_ms
    credit = link.credits_bytes is not None
    out = {}
    for key, raw in assignments.items():
        if key not in KEYS:
            raise UserError(f"{where}: unknown setting {key!r} (known: {', '.join(KEYS)})")
        if key == "down":
            out[key] = _boolean(where, raw)
            continue
        value = _number(where, key, raw)
        if key in ("queue_bytes", "credits_bytes"):
            if value != int(value) or value < 9000:
                raise UserError(f"{where}: {key} must be a whole number of bytes, at least 9000 (one jumbo "
                                f"frame), got {raw}")
            value = int(value)
        if key == "rtt_ms" and from_site is not None:
            raise UserError(f"{where}: rtt_ms describes both ways; give delay_ms or fibre_km with --from")
        if key in ("fibre_km", "bandwidth_gbps", "rtt_ms") and value <= 0:
            raise UserError(f"{where}: {key} must be > 0, got {raw}")
        if key == "loss" and not 0 <= value <= 1:
            raise UserError(f"{where}: loss must be a probability in [0, 1], got {raw}")
        if value < 0:
            raise UserError(f"{where}: {key} must be >= 0, got {raw}")
        if key == "loss" and value and credit:
            raise UserError(f"{where}: a credit link is lossless (frames wait for credits); loss cannot be set, "
                            f"use down=true to cut it")
        if key == "credits_bytes" and not credit:
            raise UserError(f"{where}: credits_bytes: the link has a tail-drop queue, not credit flow control "
                            f"(flow does not change live)")
        if key in ("delay_ms", "fibre_km", "rtt_ms"):
            if "delay_ms" in out:
                raise UserError(f"{where}: delay_ms, fibre_km and rtt_ms set the same delay; give one")
            delay = {"delay_ms": value, "fibre_km": federation.fibre_one_way_ms(value),
                     "rtt_ms": value / 2 - local_one_way_ms}[key]
            if delay <= 0:
                raise UserError(f"{where}: rtt_ms {raw} is not more than the local fabrics' latency alone")
            out["delay_ms"] = delay
        else:
            out[key] = value
    return {src: dict(out) for src in ((from_site,) if from_site else (link.a, link.b))}


def _number(where: str, key: str, raw: object) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(raw, bool) or not math.isfinite(value):
        raise UserError(f"{where}: {key} must be a number, got {raw!r}")
    return value


def _boolean(where: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if raw in ("true", "false"):
        return raw == "true"
    raise UserError(f"{where}: down must be true or false, got {raw!r}")


def request(link: Link, changes: dict[str, dict]) -> str:
    """The emulator's `set` request: site a's way has the plain flags, b's the `back-` ones."""
    words = []
    for src, new in changes.items():
        prefix = "" if src == link.a else "back-"
        for key, value in new.items():
            flag, factor = FLAGS[key]
            text = ("true" if value else "false") if key == "down" else f"{value * factor:.6g}"
            words.append(f"{prefix}{flag}={text}")
    return "set " + " ".join(words)


def control(plan: Plan, link: Link, line: str) -> tuple[dict, int]:
    """One request to the link's emulator: its reply, and when it was sent (CLOCK_MONOTONIC ns;
    once connected: the command is its line, the connection only its way there)."""
    path = core.control_path(plan, link)
    if not Path(path).exists():
        raise UserError(f"link {link.name}: its emulator has no control socket {path} (started by an older "
                        f"geofed); bring the testbed up again for live changes")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(REPLY_TIMEOUT_S)
        try:
            s.connect(path)
            sent_ns = time.monotonic_ns()
            s.sendall(line.encode() + b"\n")
            reply = s.makefile().readline()
        except OSError as e:
            raise UserError(f"link {link.name}: the emulator's control socket {path}: {e}") from None
    if not reply:
        raise UserError(f"link {link.name}: the emulator closed its control socket without a reply")
    out = json.loads(reply)
    if "error" in out:
        raise UserError(f"link {link.name}: the emulator refused the change: {out['error']}")
    return out, sent_ns


@contextmanager
def _locked(plan: Plan) -> Iterator[dict]:
    """The testbed's state, read and written back whole under a lock: two changes at once
    (two schedules, say) record both."""
    with open(Path(plan.state_dir) / "live.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = core.read_state(plan)
        yield state
        core.write_state(plan, state)


def set_link(fed: Federation, link_name: str, assignments: dict[str, object],
             from_site: str | None = None) -> list[dict]:
    """Change link `link_name` of `fed`'s running testbed: `assignments` maps keys of KEYS
    to values (numbers, or their text as on the command line); `from_site` picks the way
    that leaves that site, None both. Returns what was recorded in the state's `changes`:
    per way and key that changed {time (epoch s), link, way ("M->H"), key, old, new,
    in_force_ms (from the command to the emulator applying it)}."""
    plan = core.require_up(fed)
    link = find_link(fed, link_name)
    changes = parse(link, assignments, from_site)
    with _locked(plan) as state:
        reply, sent_ns = control(plan, link, request(link, changes))
        applied_ns = max(reply[w]["applied_ns"] for w in ("a_to_b", "b_to_a"))
        at = time.time() - (time.monotonic_ns() - applied_ns) / 1e9
        in_force_ms = (applied_ns - sent_ns) / 1e6
        ways = settings(state, link)
        done = []
        for src, new in changes.items():
            for key, value in new.items():
                done.append({"time": at, "link": link.name, "way": way_name(link, src), "key": key,
                             "old": ways[src][key], "new": value, "in_force_ms": in_force_ms})
                ways[src][key] = value
        emu = state["emulators"][link.name]
        emu["ways"] = ways
        emu["delay_us"] = {src: w["delay_ms"] * 1e3 for src, w in ways.items()}
        state.setdefault("changes", []).extend(done)
    return done


def counters(fed: Federation, link_name: str) -> dict:
    """The link's emulator counters now, per way (`a_to_b`, `b_to_a`): frames delivered,
    dropped (queue, loss, down, credit wait), handed on (`wire_out`), still `held`, and
    `out_of_order` (frames that left before one held earlier: always 0)."""
    plan = core.require_up(fed)
    link = find_link(fed, link_name)
    reply, _ = control(plan, link, "stats")
    return {w: reply[w]["counters"] for w in ("a_to_b", "b_to_a")}


def current(fed: Federation) -> Federation:
    """`fed` with every link as its running testbed's emulator has it now (changes since
    `up` included; a link down counts as losing every frame)."""
    state = core.read_state(core.require_up(fed))
    links = []
    for link in fed.links:
        ways = {}
        for src, now in settings(state, link).items():
            w = link.way(src)
            ways[src] = replace(w, propagation_ms=now["delay_ms"],
                                one_way_ms=w.one_way_ms - w.propagation_ms + now["delay_ms"],
                                bandwidth_gbps=now["bandwidth_gbps"], queue_bytes=now["queue_bytes"],
                                jitter_us=now["jitter_us"], loss=1.0 if now["down"] else now["loss"],
                                credits_bytes=now["credits_bytes"])
        if link.credits_bytes is not None:
            rtt = sum(w.propagation_ms for w in ways.values())
            ways = {src: replace(w, credit_rtt_ms=rtt) for src, w in ways.items()}
        back = ways[link.b] if link.back is not None or ways[link.b] != ways[link.a] else None
        links.append(replace(link, **vars(ways[link.a]), back=back))
    return replace(fed, links=tuple(links))


def load_schedule(fed: Federation, path: str | Path) -> list[tuple[float, str, dict, str | None]]:
    """A schedule file: `[[change]]` tables with `at_s` (seconds after the start), `link`,
    optional `from` (a site: that way only) and settings as `testbed set` takes them;
    checked whole before anything changes. Sorted by time: (at_s, link, settings, from)."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"{path}: cannot read schedule: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: invalid TOML: {e}") from None
    unknown = sorted(set(doc) - {"change"})
    entries = doc.get("change")
    if unknown or not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise UserError(f"{path}: a schedule is [[change]] tables (at_s, link, from, settings), "
                        f"got {', '.join(unknown) or 'none'}")
    out = []
    for i, e in enumerate(entries):
        where = f"{path}: change[{i}]"
        at = e.get("at_s")
        if isinstance(at, bool) or not isinstance(at, (int, float)) or not 0 <= at < math.inf:
            raise UserError(f"{where}.at_s: seconds after the start (>= 0), got {at!r}")
        name = e.get("link")
        if not isinstance(name, str):
            raise UserError(f"{where}.link: a link like \"M-H\", got {name!r}")
        from_site = e.get("from")
        assignments = {k: v for k, v in e.items() if k not in ("at_s", "link", "from")}
        try:
            parse(find_link(fed, name), assignments, from_site)
        except UserError as err:
            raise UserError(f"{where}: {err}") from None
        out.append((float(at), name, assignments, from_site))
    return sorted(out, key=lambda x: x[0])


def run_schedule(fed: Federation, schedule: list[tuple[float, str, dict, str | None]],
                 progress: Progress) -> list[dict]:
    """Apply each change at its time after now, in the foreground; a line per change."""
    core.require_up(fed)
    start = time.monotonic()
    done = []
    for at, name, assignments, from_site in schedule:
        time.sleep(max(0.0, start + at - time.monotonic()))  # the schedule's own clock
        changed = set_link(fed, name, assignments, from_site)
        progress(f"[+{time.monotonic() - start:.3f} s] {describe(changed)}")
        done += changed
    return done


def describe(changes: list[dict]) -> str:
    """One line: what changed on which way, and how soon it was in force."""
    parts = [f"{c['way']} {c['key']} {show(c['old'])} -> {show(c['new'])}" for c in changes]
    return (f"link {changes[0]['link']}: " + ", ".join(parts)
            + f"; in force {changes[0]['in_force_ms']:.3f} ms after the command")


def show(v) -> str:
    """A setting as `testbed set` takes it: true/false, a number to 6 digits."""
    if isinstance(v, bool) or v is None:
        return str(v).lower()
    return f"{v:.6g}"
