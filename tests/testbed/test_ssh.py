"""Real OpenSSH between the testbed's nodes: a hostfile job over ssh as a normal user runs
its ranks at both sites, each finding its node by its host name as on a cluster, under
MPICH's Hydra and under Open MPI's mpirun; `down`
leaves no server, session, user or key, also after a crash."""

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import GEOFED, needs_root, no_leftovers, run_group, two_site_federation
from geofed import federation
from geofed.testbed import ssh
from geofed.testbed import core, host, services

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(ssh.SSHD), reason="OpenSSH server not installed (./setup.sh)")]
PYTHON = os.path.join(os.path.dirname(GEOFED), "python")


def up(tmp_path, tag):
    name = f"gfssh{tag}-{os.getpid()}"
    tmp_path.chmod(0o755)  # the testbed's user reads the federation and hostfile here
    for parent in tmp_path.parents:
        if parent == Path(tempfile.gettempdir()):
            break
        parent.chmod(parent.stat().st_mode | 0o711)
    path = tmp_path / "fed.toml"
    path.write_text(two_site_federation(name, rtt_ms=2.0))
    path.chmod(0o644)
    fed = federation.load(path)
    core.up(fed)
    return fed, ssh.up(fed)


def gone(fed_name: str, user: str) -> list[str]:
    found = no_leftovers(fed_name)
    try:
        pwd.getpwnam(user)
        found.append(f"user {user}")
    except KeyError:
        pass
    every = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    found += [f"pid {p}" for p in host.pids_with_env(every, services.ENV_MARK, str(ssh.ssh_dir(fed_name)))]
    return found


def test_a_hostfile_job_over_ssh_runs_as_a_normal_user_at_both_sites(tmp_path, mpi_choice):
    fed, state = up(tmp_path, "j")
    try:
        hostfile = tmp_path / "hosts"
        hostfile.write_text("A1 A\nA2 A\nB1 B\n")
        hostfile.chmod(0o644)
        plan, _ = ssh.require_up(fed)
        # one write per line: the ranks' output is forwarded as it comes, print()'s pieces apart
        probe = ("import os; from mpi4py import MPI; from geofed import runtime; os.write(1, "
                 "f'{runtime.node()} {runtime.site()} {os.getuid()} {MPI.Get_library_version().split()[0]}\\n'.encode())")
        res = run_group(ssh.login_argv(plan, state, ["env", f"GEOFED_MPI={mpi_choice}", GEOFED, "run", "-f",
                                                     str(fed.path), "--hostfile", str(hostfile), "-p", "A1B1", "--",
                                                     PYTHON, "-c", probe]), 300, cwd="/tmp")
        assert res.returncode == 0, res.stdout + res.stderr
        uid = pwd.getpwnam(state["user"]).pw_uid
        assert uid != 0
        library = {"mpich": "MPICH", "openmpi": "Open"}[mpi_choice]
        assert sorted(res.stdout.split("\n")[:2]) == [f"A1 A {uid} {library}", f"B1 B {uid} {library}"], res.stdout
        # Root may not log in, and no password opens a session: the key is the way in.
        login = plan.node("A1")
        res = run_group(host.in_netns(login.netns, ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                                                    "-o", "UserKnownHostsFile=/dev/null", "root@" + plan.node("B1").address,
                                                    "true"]), 60)
        assert res.returncode == 255 and "Permission denied" in res.stderr
    finally:
        core.down(fed.name)
    assert gone(fed.name, state["user"]) == []


def test_down_after_a_crash_leaves_no_server_session_user_or_key(tmp_path):
    fed, state = up(tmp_path, "x")
    try:
        plan, _ = ssh.require_up(fed)
        # A session left running on B1, then B1's sshd killed under it.
        session = subprocess.Popen(ssh.login_argv(plan, state, ["ssh", "B1", "sleep 300"]),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        uid = pwd.getpwnam(state["user"]).pw_uid
        deadline = time.monotonic() + 30
        while not any(os.stat(f"/proc/{p}").st_uid == uid and open(f"/proc/{p}/comm").read().strip() == "sleep"
                      for p in os.listdir("/proc") if p.isdigit() and os.path.exists(f"/proc/{p}")):
            assert time.monotonic() < deadline, "the session never started"
            time.sleep(0.05)
        os.kill(state["daemons"]["sshd-B1"]["pid"], 9)
        removed = ssh.down(fed.name)
        session.wait(timeout=30)
        assert any(r.startswith("user ") for r in removed)
        assert not ssh.ssh_dir(fed.name).exists()
    finally:
        core.down(fed.name)
    assert gone(fed.name, state["user"]) == []
    assert shutil.which("ssh")  # the host's own OpenSSH is untouched
