"""One supervisor for the servers geofed runs for a federation, and the registry that stops them.

A service is what one `geofed ops ... up` or one benchmark starts for a federation:
Slurm's daemons, an sshd per node, the storage export and its mounts, the directory
servers, a benchmark's peers. Each has a directory under the one state root,

    /run/geofed/<federation>/services/<service>/

with its configuration, logs and its marker `service.json`, written before anything of
it exists and again after every step. The marker alone says how to stop all of it: the
daemons' pids (each leads a session of its own, whose process group holds what it
forked), environment marks its processes carry (found also when they left that session:
Slurm's job steps, sshd's logins), the mounts, users and directories it made. `stop`
reads nothing else, so `geofed testbed down` stops every service of a federation,
whichever module started it, also after the process that started it was killed.

Daemons are geofed's foreground children with their own configuration and data, never
the host's system services: started in a session of their own (a Ctrl-C in the terminal
reaches geofed, which stops them), ready when their probe says so (polled until a
deadline), and one that is not ready by then fails with one line quoting its log's tail.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from geofed.testbed import host
from geofed.testbed.plan import STATE_ROOT

MARKER = "service.json"
# Every daemon's environment holds ENV_MARK=<its service's directory>; what it forks inherits it.
ENV_MARK = "GEOFED_SERVICE"
POLL_S = 0.05
STRAY_GRACE_S = 2.0
Progress = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


@dataclass(frozen=True)
class Daemon:
    """A server run in the foreground: its command line (entering its namespace already),
    a probe that holds once it serves, and how long it may take to start and to stop."""

    key: str
    argv: list[str]
    ready: Callable[[], bool]
    netns: str | None = None  # where it runs, for the record
    deadline_s: float = 60.0
    grace_s: float = 5.0
    env: Mapping[str, str] = field(default_factory=dict)


def caller() -> dict:
    """Who runs this geofed, since when, and with which command (owners, markers)."""
    user = os.environ.get("SUDO_USER") or pwd.getpwuid(os.getuid()).pw_name
    argv = [Path(sys.argv[0]).name] + sys.argv[1:] if sys.argv and sys.argv[0] else ["python"]
    return {"user": user, "pid": os.getpid(), "command": shlex.join(argv), "since": time.time()}


def fed_dir(fed_name: str) -> Path:
    """The federation's state directory: its testbed's files, owner and services."""
    return Path(STATE_ROOT) / fed_name


def service_dir(fed_name: str, name: str) -> Path:
    return fed_dir(fed_name) / "services" / name


def read(fed_name: str, name: str) -> dict | None:
    """A service's marker; None when it is not registered."""
    return host.read_json(service_dir(fed_name, name) / MARKER)


def running(state: dict | None) -> bool:
    """Whether a service was started whole and every daemon of it still runs."""
    return bool(state) and state["complete"] is True and all(host.alive(d["pid"]) for d in state["daemons"].values())


def dead(state: dict) -> list[str]:
    """The daemons of a service that no longer run."""
    return [k for k, d in state["daemons"].items() if not host.alive(d["pid"])]


class Service:
    """A service being started: its directory, its marker (`state`) and its daemons."""

    def __init__(self, fed_name: str, name: str, fields: dict):
        self.fed_name, self.name = fed_name, name
        self.dir = service_dir(fed_name, name)
        # Passable by anyone (a testbed user's home lies below); a service closes its own.
        for d in (fed_dir(fed_name).parent, fed_dir(fed_name), self.dir.parent):
            d.mkdir(exist_ok=True)
            os.chmod(d, 0o755)
        self.dir.mkdir()
        os.chmod(self.dir, 0o755)  # servers running as nobody reach their files
        self.state = {"service": name, "federation": fed_name, "by": caller(), "complete": False, "daemons": {},
                      "env_marks": [[ENV_MARK, str(self.dir)]], "mounts": [], "users": [], "trees": [], "dirs": [],
                      **fields}
        self.save()

    @classmethod
    def of(cls, fed_name: str, name: str) -> Service:
        """A service that runs, from its marker: to restart one of its daemons."""
        svc = cls.__new__(cls)
        svc.fed_name, svc.name, svc.dir = fed_name, name, service_dir(fed_name, name)
        svc.state = read(fed_name, name)
        if svc.state is None:
            raise host.HostError(f"{name} of {fed_name} is not up")
        return svc

    def save(self) -> None:
        host.write_json(self.dir / MARKER, self.state)

    def register(self, kind: str, item) -> None:
        """Note a mount, user, tree or directory in the marker before making it, so a
        crash in between still leaves it where `stop` looks."""
        self.state[kind].append(item)
        self.save()

    def make_user(self, name: str, gecos: str, home: Path) -> pwd.struct_passwd:
        """A normal user (no password: `*` opens no session, yet is not locked as `!` is)
        with its home `home` below this service; one of that name is this service's only
        when its comment (`gecos`) says so, and is then a leftover made afresh."""
        try:
            if pwd.getpwnam(name).pw_gecos != gecos:
                raise host.HostError(f"a user {name} exists already and is not this testbed's; remove it first")
            subprocess.run(["userdel", name], capture_output=True, check=True)
        except KeyError:
            pass
        self.register("users", {"name": name, "gecos": gecos})
        res = subprocess.run(["useradd", "-M", "-U", "-d", str(home), "-s", "/bin/sh", "-p", "*", "-c", gecos, name],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise host.HostError(f"useradd {name}: {res.stderr.strip()}")
        pw = pwd.getpwnam(name)
        home.mkdir(mode=0o700)
        os.chown(home, pw.pw_uid, pw.pw_gid)
        return pw

    def mark(self, key: str, value: str) -> None:
        """Processes whose environment sets key=value are this service's too."""
        self.register("env_marks", [key, value])

    def start(self, d: Daemon) -> int:
        """Start a daemon and return its pid once its probe holds; one line quoting its
        log's tail when it exits first or is not ready by its deadline."""
        log = self.dir / f"{d.key}.log"
        with host.interrupt_after(), open(log, "ab") as out:
            proc = subprocess.Popen(d.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=dict(os.environ, **d.env, **{ENV_MARK: str(self.dir)}))
            self.state["daemons"][d.key] = {"pid": proc.pid, "netns": d.netns, "argv": d.argv, "log": str(log),
                                            "grace_s": d.grace_s}
            self.save()
        deadline = time.monotonic() + d.deadline_s
        while not d.ready():
            if proc.poll() is not None:
                raise host.HostError(f"{self.name}: {d.key} exited with status {proc.returncode} before it was "
                                     f"ready: {host.log_tail(log)}")
            if time.monotonic() > deadline:
                raise host.HostError(f"{self.name}: {d.key} was not ready after {d.deadline_s:g} s: {host.log_tail(log)}")
            time.sleep(POLL_S)  # polling the probe until its deadline
        return proc.pid


    def restart(self, key: str, ready: Callable[[], bool], while_stopped: Callable[[], None],
                deadline_s: float = 60.0) -> int:
        """Stop one daemon (its process group), run `while_stopped` (its data swapped, say),
        and start it again with the same command line; its new pid once its probe holds."""
        d = self.state["daemons"][key]
        host.terminate([d["pid"]], grace=d["grace_s"], groups=True)
        while_stopped()
        return self.start(Daemon(key, d["argv"], ready, d["netns"], deadline_s, d["grace_s"]))


def up(fed_name: str, name: str, start: Callable[[Service], None], progress: Progress = _quiet,
       keep: Callable[[dict], bool] = lambda state: True, **fields) -> dict:
    """The one lifecycle of a service: left as it is when it runs whole (and `keep` holds),
    else stopped and started afresh by `start`; a failed or interrupted start leaves nothing.
    Returns its marker."""
    state = read(fed_name, name)
    if running(state) and keep(state):
        progress(f"{name} of {fed_name} is already up")
        return state
    stop(fed_name, name)
    svc = Service(fed_name, name, fields)
    try:
        start(svc)
        svc.state["complete"] = True
        svc.save()
    except BaseException:
        stop(fed_name, name)
        raise
    return svc.state


# ---------------------------------------------------------------- stopping, from the marker alone


def stop(fed_name: str, name: str) -> list[str]:
    """Stop a service from its marker: mounts off (lazily: a process inside does not keep
    them), daemons (SIGTERM to their process groups, SIGKILL after their grace), every
    process carrying one of its marks, its users, then its files; harmless when absent."""
    d = service_dir(fed_name, name)
    state = host.read_json(d / MARKER)
    if state is None:
        if d.exists():  # made, but nothing started yet: the marker comes first
            shutil.rmtree(d, ignore_errors=True)
        _remove_empty(fed_name)
        return []
    removed = []
    trees = [Path(t) for t in state["trees"]] + [d]
    mounts = set(state["mounts"]) | {m for t in trees for m in _mounts_below(t)}
    for m in sorted(mounts, reverse=True):
        if os.path.ismount(m):
            subprocess.run(["umount", "-l", m], capture_output=True)
            removed.append(f"mount {m}")
    daemons = [v for v in state["daemons"].values() if host.alive(v["pid"])]
    host.terminate([v["pid"] for v in daemons], grace=max([v["grace_s"] for v in daemons], default=0), groups=True)
    every = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    strays = {p for key, value in state["env_marks"] for p in host.pids_with_env(every, key, value)}
    users = [u for u in state["users"] if _made_by_us(u)]
    uids = {pwd.getpwnam(u["name"]).pw_uid for u in users}
    strays |= {p for p in every if _uid(p) in uids}
    host.terminate(sorted(strays), grace=STRAY_GRACE_S)
    if state["daemons"] or strays:
        removed.append(f"{name}: {len(state['daemons'])} daemons" + (f", {len(strays)} other processes" if strays else ""))
    for u in users:
        res = subprocess.run(["userdel", u["name"]], capture_output=True, text=True)
        if res.returncode != 0:
            raise host.HostError(f"userdel {u['name']}: {res.stderr.strip()}")
        removed.append(f"user {u['name']}")
    for t in trees:
        if t.exists():
            shutil.rmtree(t, ignore_errors=True)
            if t != d:
                removed.append(str(t))
    for made in reversed(state["dirs"]):
        try:
            Path(made).rmdir()  # only when nothing else uses it
        except OSError:
            pass
    _remove_empty(fed_name)
    return removed


def stop_all(fed_name: str) -> list[str]:
    """Stop every service of the federation, the last started first."""
    return [r for name in [s["service"] for s in reversed(listing(fed_name))] for r in stop(fed_name, name)]


def listing(fed_name: str) -> list[dict]:
    """The markers of the federation's services, the first started first (one that cannot
    be read, as a non-root user, is named with what is known)."""
    root = fed_dir(fed_name) / "services"
    found = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            state = host.read_json(d / MARKER)
        except PermissionError:
            state = {"service": d.name, "by": {"since": d.stat().st_mtime}, "daemons": {}, "complete": None}
        found.append(state or {"service": d.name, "by": {"since": d.stat().st_mtime}, "daemons": {}, "complete": False})
    return sorted(found, key=lambda s: s["by"]["since"])


def summary(state: dict) -> str:
    """`slurm-fed 7/7`: a service and how many of its daemons run."""
    if state["complete"] is None:
        return f"{state['service']} (root's)"
    alive = len(state["daemons"]) - len(dead(state))
    counts = f" {alive}/{len(state['daemons'])}" if state["daemons"] else ""
    return state["service"] + counts + ("" if state["complete"] else " (half started)")


def user_name(key: str) -> str:
    """A testbed user's name for `key` (a federation, a service): geofed's prefix, and
    short enough for any useradd."""
    return "geofed-" + hashlib.sha256(key.encode()).hexdigest()[:8]


def _made_by_us(user: dict) -> bool:
    """A user of that name that this service made (its comment says so), not one that was there."""
    try:
        return pwd.getpwnam(user["name"]).pw_gecos == user["gecos"]
    except KeyError:
        return False


def _mounts_below(top: Path) -> list[str]:
    prefix = str(top).rstrip("/") + "/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1].encode().decode("unicode_escape") for line in f]
    return [p for p in points if p.startswith(prefix)]


def _uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _remove_empty(fed_name: str) -> None:
    """The services directory, and the federation's, once nothing is left in them."""
    for d in (fed_dir(fed_name) / "services", fed_dir(fed_name), fed_dir(fed_name).parent):
        try:
            d.rmdir()
        except OSError:
            return
