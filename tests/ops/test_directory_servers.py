"""The directory servers' life: on a testbed's login nodes, and `down` after a crash, a
failed `up` and a Ctrl-C leaving nothing behind (real slapd and Samba, root)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import GEOFED, TWO_DIRECTORY_SITES, needs_root, no_leftovers, run_geofed
from geofed import federation
from geofed.ops import directory, userbase
from geofed.testbed import host

pytestmark = [needs_root, pytest.mark.slow]


@pytest.fixture
def fed(write_fed):
    name = f"dirsrv{os.getpid() % 10000}"
    path = write_fed(TWO_DIRECTORY_SITES.format(name=name))
    yield federation.load(path)
    run_geofed("ops", "directory", "down", str(path))
    run_geofed("testbed", "down", str(path))


def skip_if_ad_port_taken() -> None:
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 389)) == 0:
            pytest.skip("127.0.0.1:389 is taken (another AD site is up)")


def gone(fed_name: str, pids: list[int]) -> list[str]:
    left = [f"pid {p}" for p in pids if host.alive(p)]
    if directory.run_dir(fed_name).exists():
        left.append(str(directory.run_dir(fed_name)))
    return left


def test_on_the_testbed_servers_listen_on_the_login_nodes_and_sync_crosses_the_link(fed, tmp_path):
    assert run_geofed("testbed", "up", str(fed.path)).returncode == 0
    res = run_geofed("ops", "directory", "up", str(fed.path))
    assert res.returncode == 0, res.stderr
    assert "ldap://198.18.1.1:389/" in res.stdout and "ldap://198.18.2.1:389/" in res.stdout
    assert "(in geofed-" + fed.name + ".H1)" in res.stdout
    state = directory.read_state(fed.name)
    assert state["mode"] == "testbed" and state["client_netns"] == f"geofed-{fed.name}.M1"
    # Samba listens inside Heidelberg's login node, on its address.
    listening = host.run_in(f"geofed-{fed.name}.H1", ["ss", "-ltnH"]).stdout
    assert "198.18.2.1:389 " in listening and "198.18.2.1:636 " in listening
    res = run_geofed("ops", "users", "sync", "-f", str(fed.path), "--out", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "hau:x:204101:203000:" in (tmp_path / "passwd").read_text()
    check = subprocess.run([GEOFED, "ops", "users", "check", "hau", "-f", str(fed.path)],
                           input=userbase.fixture_password("hau") + "\n", capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "authenticated by site H" in check.stdout, check.stdout + check.stderr
    pids = [d["pid"] for d in state["daemons"].values()]
    assert run_geofed("ops", "directory", "down", str(fed.path)).returncode == 0
    assert gone(fed.name, pids) == []
    assert run_geofed("testbed", "down", str(fed.path)).returncode == 0
    assert no_leftovers(fed.name) == []


def test_down_after_a_server_crashed_stops_the_rest_and_removes_every_file(fed):
    skip_if_ad_port_taken()
    state = directory.up(fed)
    pids = [d["pid"] for d in state["daemons"].values()]
    os.kill(state["daemons"]["H"]["pid"], signal.SIGKILL)
    res = run_geofed("ops", "users", "sync", "-f", str(fed.path), "--dry-run")
    assert res.returncode == 2 and "broken (H)" in res.stderr and len(res.stderr.splitlines()) == 1
    res = run_geofed("ops", "directory", "down", str(fed.path))
    assert res.returncode == 0 and "directory: 3 daemons" in res.stdout
    deadline = time.monotonic() + 10
    while gone(fed.name, pids) and time.monotonic() < deadline:
        time.sleep(0.05)  # the killed server's zombie waits for its reaper
    assert gone(fed.name, pids) == []


def test_a_failed_up_leaves_nothing(fed):
    """Heidelberg's data cannot be loaded (two accounts of one name): the Mannheim slapd
    already started must be stopped and every file removed."""
    skip_if_ad_port_taken()
    twice = userbase.HomeSite(userbase.HEIDELBERG.users + userbase.HEIDELBERG.users[:1], [])
    with pytest.raises(host.HostError, match="ldbadd"):
        directory.up(fed, homes={"H": twice})
    assert not directory.run_dir(fed.name).exists()
    res = subprocess.run(["pgrep", "-f", str(directory.run_dir(fed.name))], capture_output=True, text=True)
    assert res.stdout == ""


def test_ctrl_c_during_up_exits_130_and_leaves_nothing(fed):
    skip_if_ad_port_taken()
    proc = subprocess.Popen([GEOFED, "ops", "directory", "up", str(fed.path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # interrupt once the first server runs
        state = directory.read_state(fed.name)
        if state and state["daemons"].get("M"):
            break
        time.sleep(0.05)
    assert state and state["daemons"].get("M"), "up never started a server"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert gone(fed.name, [state["daemons"]["M"]["pid"]]) == []
    assert subprocess.run(["pgrep", "-f", str(directory.run_dir(fed.name))], capture_output=True).stdout == b""
