"""Thin wrappers over the host's namespaces, cgroups and processes (needs root)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")


class HostError(RuntimeError):
    """A host operation failed although the input was valid (not the user's mistake)."""


HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupt_after():
    """Hold a Ctrl-C (SIGINT) or SIGTERM until the block ends, then deliver it.

    Interrupted while it starts a child, subprocess loses the child, which runs on
    unseen: an `ip netns add` that finished after the cleanup had looked left a
    namespace behind. Held here, the interrupt lands once the child is ours (or done).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    old = {sig: signal.signal(sig, lambda sig, _: caught.append(sig)) for sig in HELD_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(caught):
            signal.raise_signal(sig)


def _run(argv: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
    # A command is whole or not run: one still running when Ctrl-C comes runs to its
    # end (a probe: its few seconds; a terminal's Ctrl-C stops it sooner, directly).
    with interrupt_after():
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    argv = ["ip"] + (["-n", netns] if netns else []) + list(args)
    res = _run(argv)
    if check and res.returncode != 0:
        raise HostError(f"{' '.join(argv)}: {res.stderr.strip()}")
    return res


def in_netns(netns: str, argv: list[str]) -> list[str]:
    """The command line running `argv` inside a namespace (with its /etc/netns files)."""
    return ["ip", "netns", "exec", netns] + argv


def in_netns_keep_mounts(netns: str, argv: list[str]) -> list[str]:
    """Like in_netns, but /sys stays the host's, so cgroups remain reachable from inside."""
    return ["nsenter", f"--net=/run/netns/{netns}"] + argv


def run_in(netns: str, argv: list[str], check: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess:
    res = _run(in_netns(netns, argv), timeout=timeout)
    if check and res.returncode != 0:
        raise HostError(f"in {netns}: {' '.join(argv)}: {res.stderr.strip()}")
    return res


def port_open(netns: str, address: str, port: int) -> bool:
    """Whether something accepts TCP connections at address:port, seen from `netns`."""
    probe = "import socket,sys\nsocket.create_connection((sys.argv[1], int(sys.argv[2])), 1).close()"
    return subprocess.run(in_netns_keep_mounts(netns, ["python3", "-c", probe, address, str(port)]),
                          capture_output=True).returncode == 0


def listening(netns: str, port: int) -> bool:
    """Whether a socket listens on TCP `port` in `netns`, asked of the kernel: no connection
    is made, which a server serving one client at a time would count as its client."""
    return bool(run_in(netns, ["ss", "-Hltn", f"sport = :{port}"], check=False).stdout.strip())


def read_json(path: Path) -> dict | None:
    """A state file written by write_json; None when absent (or cut short by a crash)."""
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_json(path: Path, data: dict) -> None:
    """Replace a state file whole: a reader never sees half of it."""
    tmp = Path(path).with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def sysctl(netns: str, key: str, value: str, required: bool = True) -> None:
    path = "/proc/sys/" + key.replace(".", "/")
    res = run_in(netns, ["sh", "-c", f"echo '{value}' > {path}"], check=False)
    if required and res.returncode != 0:
        raise HostError(f"in {netns}: sysctl {key}={value}: {res.stderr.strip()}")


def busy_cpu_s() -> float:
    """Seconds the host's cores have spent busy since boot (every process and the kernel's
    interrupts; /proc/stat's first line less idle and iowait)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def netns_list() -> list[str]:
    res = ip("netns", "list", check=False)
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    res = ip("netns", "pids", netns, check=False)
    return [int(p) for p in res.stdout.split()]


def pids_with_env(pids: list[int], key: str, value: str) -> list[int]:
    """The processes among `pids` whose environment sets key=value."""
    want = f"{key}={value}".encode()
    out = []
    for p in pids:
        try:
            with open(f"/proc/{p}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    out.append(p)
        except OSError:
            pass
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it is dead for our purposes.
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command's name (state, ppid, pgrp, ...); None
    when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def cpu_s(pid: int) -> float:
    """CPU seconds the live threads of process `pid` have run (/proc/PID/task/*/schedstat, in
    ns: /proc/PID/stat's ticks are 10 ms, too coarse for a short measurement; a thread that
    has ended is not counted); 0 when the process is gone."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(task.read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            pass  # a thread that ended between the listing and the read
    return total / 1e9


def terminate(pids: list[int], grace: float = 3.0, groups: bool = False) -> None:
    """SIGTERM, then SIGKILL whatever is still there after `grace` seconds; with `groups`,
    to each pid's process group (a server started in its own session, and what it forked),
    and the group counts as there while any of its members is: a leader that exits first
    leaves workers (Samba's, slapd's helpers) that must not outlive the return."""
    kill = os.killpg if groups else os.kill
    there = (lambda p: alive(p) or bool(group_members(p))) if groups else alive
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(there(p) for p in pids):
            time.sleep(0.02)
        pids = [p for p in pids if there(p)]
        if not pids:
            return


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    members = []
    for d in os.listdir("/proc"):
        fields = stat_fields(int(d)) if d.isdigit() else None
        if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":  # state, ppid, pgrp
            members.append(int(d))
    return members


def spawn_ready(argv: list[str], log_path: str | None = None, timeout: float = 10.0) -> subprocess.Popen:
    """Start a server that prints `ready` once it listens; return when it has.

    Runs in its own session so that a Ctrl-C in the user's terminal reaches geofed,
    which then cleans up, rather than the servers directly.
    """
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    try:
        with interrupt_after():
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    finally:
        if log_path:
            log.close()
    try:
        if _wait_ready(proc, timeout):
            return proc
    except BaseException:
        proc.kill()  # interrupted before it was ready: the caller never learns of it
        proc.wait()
        raise
    proc.kill()
    proc.wait()
    tail = f": {log_tail(Path(log_path))}" if log_path else ""
    raise HostError(f"{argv[-1] if len(argv) < 5 else ' '.join(argv[:6])}... did not become ready{tail}")


def log_tail(log: Path, lines: int = 3) -> str:
    """The last lines of a server's log on one line, to quote when it failed."""
    try:
        last = log.read_text(errors="replace").strip().splitlines()[-lines:]
    except FileNotFoundError:
        last = []
    return " | ".join(last) or "no output"


def _wait_ready(proc: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    line = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            return False
        chunk = os.read(proc.stdout.fileno(), 64)
        if not chunk:
            return False
        line += chunk
        if b"ready" in line:
            return True
    return False


# ---------------------------------------------------------------- cgroups


def cpu_cgroup_dir(rel: str) -> Path:
    """The cgroup directory for `rel` under the cpu controller (v1 or v2)."""
    if (CGROUP_FS / "cpu" / "cpu.cfs_quota_us").exists():
        return CGROUP_FS / "cpu" / rel
    return CGROUP_FS / rel


def cgroup_create(rel: str, quota_us: int, period_us: int) -> Path:
    d = cpu_cgroup_dir(rel)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "cpu.cfs_quota_us").exists():
        (d / "cpu.cfs_period_us").write_text(str(period_us))
        (d / "cpu.cfs_quota_us").write_text(str(quota_us))
    else:
        (d / "cpu.max").write_text(f"{quota_us} {period_us}")
    return d


def cgroup_join(rel: str, pid: int) -> None:
    (cpu_cgroup_dir(rel) / "cgroup.procs").write_text(str(pid))


def cgroup_remove_tree(rel: str) -> None:
    """Kill what runs in the tree, then remove its directories, leaves first."""
    top = cpu_cgroup_dir(rel)
    if not top.exists():
        return
    dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True) + [top]
    pids = []
    for d in dirs:
        try:
            pids += [int(x) for x in (d / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            pass
    if pids:
        terminate(pids)
    for d in dirs:
        try:
            d.rmdir()
        except FileNotFoundError:
            pass
    parent = top.parent
    if parent != cpu_cgroup_dir("") and parent.name == rel.split("/")[0]:
        try:
            parent.rmdir()  # only succeeds once no other federation uses it
        except OSError:
            pass


def open_files(pid: int) -> set[str]:
    """What `pid`'s descriptors point at (a descriptor closed meanwhile is skipped)."""
    paths = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return paths
    for fd in fds:
        try:
            paths.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return paths


def orphan_segments(since: float, pattern: str = "/dev/shm/mpich_shm_*") -> set[str]:
    """MPICH segments in /dev/shm (or other files of a job: `pattern`) made since `since`
    by this user that no process maps or holds open: a live job's are held by its ranks,
    so only those of ranks killed while they started MPI are found (a finished job
    unlinks its own)."""
    made = set()
    where = Path(pattern)
    for path in where.parent.glob(where.name):
        try:
            st = path.stat()
        except OSError:
            continue
        if st.st_uid == os.getuid() and st.st_ctime >= since:
            made.add(str(path))
    if not made:
        return made
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        made -= open_files(pid) | mapped_segments(pid)
    return made


def mapped_segments(pid: int) -> set[str]:
    """MPICH's (and Open MPI's vader) shared-memory segments `pid` maps."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return {line.rstrip("\n").split(maxsplit=5)[-1].removesuffix(" (deleted)") for line in f
                    if "/dev/shm/mpich" in line or "/dev/shm/vader_segment" in line}
    except OSError:
        return set()
