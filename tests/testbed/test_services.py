"""One supervisor for every server on a testbed: `geofed testbed down` stops the directory
servers, Slurm, sshd and the storage export from their markers alone, also after the geofed
that started them was killed; testbeds have owners, listed with their services, and a
command that brings up its own testbed leaves one it did not bring up untouched (root)."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import GEOFED, TWO_DIRECTORY_SITES, needs_root, no_leftovers, run_geofed
from geofed import federation
from geofed.errors import UserError
from geofed.testbed import core, host, services, ssh, storage
from geofed.testbed.plan import make_plan

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("slurmctld") is None or shutil.which("samba") is None
                                 or not os.path.exists(ssh.SSHD), reason="Slurm, Samba or OpenSSH missing (./setup.sh)")]

OPS = {"directory": ["ops", "directory", "up"], "slurm-fed": ["ops", "slurm", "up"], "ssh": ["ops", "ssh", "up"],
       "storage-export": ["ops", "storage", "up"]}


@pytest.fixture
def fed(write_fed):
    name = f"gfsvc-{os.getpid()}"
    path = write_fed(TWO_DIRECTORY_SITES.format(name=name))
    yield federation.load(path)
    run_geofed("testbed", "down", name)
    assert no_leftovers(name) == []


def up(fed, *services_wanted) -> None:
    for argv in [["testbed", "up"]] + [OPS[s] for s in services_wanted]:
        res = run_geofed(*argv, str(fed.path))
        assert res.returncode == 0, f"{argv}: {res.stderr}"


def left_behind(fed_name: str, pids: list[int], user: str | None) -> list[str]:
    """Whatever of the federation still exists: namespaces, cgroups, files under /run and
    /var/lib, mounts, a process that was a service's or carries its mark, the ssh user."""
    found = no_leftovers(fed_name)
    found += [f"pid {p}" for p in pids if host.alive(p)]
    run_dir = str(services.fed_dir(fed_name)) + "/"
    for p in (int(x) for x in os.listdir("/proc") if x.isdigit()):
        try:
            env = Path(f"/proc/{p}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(f"{services.ENV_MARK}={run_dir}".encode()) for e in env):
            found.append(f"marked pid {p}")
    with open("/proc/self/mounts") as f:
        found += [line.split()[1] for line in f if str(storage.fed_root(fed_name)) in line]
    if storage.fed_root(fed_name).exists():
        found.append(str(storage.fed_root(fed_name)))
    if user and subprocess.run(["id", user], capture_output=True).returncode == 0:
        found.append(f"user {user}")
    return found


def test_testbed_down_stops_the_directory_slurm_ssh_and_storage_and_leaves_nothing(fed):
    up(fed, "directory", "slurm-fed", "ssh", "storage-export")
    markers = {s["service"]: s for s in services.listing(fed.name)}
    assert set(markers) == {"directory", "nss", "slurm-fed", "ssh", "storage", "storage-export"}
    assert all(s["complete"] for s in markers.values())
    pids = [d["pid"] for s in markers.values() for d in s["daemons"].values()]
    # 3 directory servers and an nslcd per node; munged, slurmctld, 2 slurmd; 2 sshd; sftp and
    # one sshfs mount at H1
    assert len(pids) == 3 + 2 + 4 + 2 + 2 and all(host.alive(p) for p in pids)
    assert all(os.path.ismount(m) for m in markers["storage-export"]["mounts"])
    user = markers["ssh"]["user"]
    res = run_geofed("testbed", "down", fed.name)
    assert res.returncode == 0, res.stderr
    assert left_behind(fed.name, pids, user) == []


@pytest.mark.parametrize("service,first", [("slurm-fed", "slurmctld"), ("ssh", "sshd-M1"), ("directory", "M")])
def test_down_stops_what_a_killed_geofed_had_started_from_its_marker(fed, service, first):
    up(fed)
    proc = subprocess.Popen([GEOFED, *OPS[service], str(fed.path)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (services.read(fed.name, service) or {"daemons": {}})["daemons"].get(first):
        assert proc.poll() is None and time.monotonic() < deadline, f"{service} never started {first}"
        time.sleep(0.02)  # polling the marker until the first daemon is in it
    os.kill(proc.pid, signal.SIGKILL)  # the crash: nothing of geofed's own cleanup runs
    proc.wait()
    marker = services.read(fed.name, service)
    pids = [d["pid"] for d in marker["daemons"].values()]
    assert pids and any(host.alive(p) for p in pids)
    res = run_geofed("testbed", "down", fed.name)
    assert res.returncode == 0, res.stderr
    assert left_behind(fed.name, pids, marker.get("user")) == []


def test_list_names_owner_and_services_status_takes_a_name_and_an_owned_testbed_is_refused(fed, tmp_path):
    up(fed, "ssh")
    me = services.caller()["user"]
    res = run_geofed("testbed", "list")
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith(f"{fed.name} "))
    assert f" up     {me} " in line and "geofed testbed up" in line and line.endswith("ssh 2/2"), line
    # status by name, as down takes it: the file it was brought up from need not be at hand
    moved = fed.path.rename(tmp_path / "elsewhere.toml")
    res = run_geofed("testbed", "status", fed.name)
    moved.rename(fed.path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"testbed {fed.name}: up, brought up by {me} at " in res.stdout and "service ssh 2/2" in res.stdout
    # What every command that brings up its own testbed (demo, sweeps, benchmarks) goes through
    plan = make_plan(fed)
    emulators = [e["pid"] for e in core.read_state(plan)["emulators"].values()]
    with pytest.raises(UserError, match=f"testbed {fed.name} is up already, brought up by {me} at .* with "
                                        f"`geofed testbed up {fed.path}`"):
        with core.owned(fed):
            pytest.fail("a testbed someone else brought up was taken over")
    assert core.is_up(plan) and all(host.alive(p) for p in emulators)
    assert services.running(services.read(fed.name, "ssh"))


def test_a_daemon_that_fails_or_is_never_ready_fails_with_its_log_and_leaves_nothing():
    name = f"gfsvc-unit-{os.getpid()}"
    fails = services.Daemon("broken", ["sh", "-c", "echo starting; echo cannot bind port 6817 >&2; exit 3"],
                            lambda: False)
    with pytest.raises(host.HostError, match=r"^unit: broken exited with status 3 before it was ready: "
                                             r"starting \| cannot bind port 6817$"):
        services.up(name, "unit", lambda svc: svc.start(fails))
    assert not services.fed_dir(name).exists()
    slow = services.Daemon("slow", ["sh", "-c", "echo waiting for nothing; exec sleep 600"], lambda: False,
                           deadline_s=0.5)
    started = []
    with pytest.raises(host.HostError, match=r"^unit: slow was not ready after 0.5 s: waiting for nothing$"):
        services.up(name, "unit", lambda svc: started.append(svc) or svc.start(slow))
    pid = started[0].state["daemons"]["slow"]["pid"]
    assert not host.alive(pid) and not services.fed_dir(name).exists()


def test_stop_waits_the_grace_period_then_kills_what_ignores_sigterm():
    name = f"gfsvc-grace-{os.getpid()}"
    log = services.service_dir(name, "unit") / "stubborn.log"
    stubborn = services.Daemon("stubborn", ["sh", "-c", "trap '' TERM; echo deaf to SIGTERM; while :; do sleep 0.1; done"],
                               lambda: "deaf" in log.read_text(), grace_s=1.0)
    state = services.up(name, "unit", lambda svc: svc.start(stubborn))
    pid = state["daemons"]["stubborn"]["pid"]
    assert services.running(state) and host.alive(pid)
    t0 = time.monotonic()
    removed = services.stop(name, "unit")
    assert time.monotonic() - t0 >= 1.0 and not host.alive(pid)
    assert removed == ["unit: 1 daemons"] and not services.fed_dir(name).exists()


def test_up_refuses_a_testbed_another_live_command_is_bringing_up(fed):
    """Two `up`s of one federation at once: the owner file is claimed first; the second
    is refused with one line and touches nothing of the first's."""
    other = subprocess.Popen(["sleep", "600"])
    try:
        services.fed_dir(fed.name).mkdir(parents=True)
        owner = dict(services.caller(), pid=other.pid, command="geofed bench schedule")
        host.write_json(core.owner_path(fed.name), owner)
        res = run_geofed("testbed", "up", str(fed.path))
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert f"testbed {fed.name} is being brought up by " in res.stderr and "`geofed bench schedule`" in res.stderr
        assert core.read_owner(fed.name) == owner and core.leftovers(fed.name) == []
    finally:
        other.kill()
        other.wait()
