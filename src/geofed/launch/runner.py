"""The one way geofed runs a program on a placement: testbed, hostfile (ssh) or srun.

Every workload, benchmark and the demo go through `run` or `run_ranks` (or `started`
and `ranks_started` for jobs that run side by side, like the Gray-Scott workflow's
parts). The runner
- checks that the testbed is up (or reads the hostfile) before anything starts;
- keeps the job's output in a log instead of the user's terminal: MPI's abort
  banners of a stopped job are not the user's business, and a failed job's log is
  kept under geofed-out/logs/ and named in the one-line error;
- shows the ranks' progress lines (those starting `geofed: `, see geofed.progress);
- stops the whole job on timeout, failure of a sibling or Ctrl-C: mpiexec, its
  proxies, every rank (found by the job id in its environment, also in other
  namespaces) and the MPICH shared-memory files those ranks had mapped.
Exit statuses (docs/launch.md): timeout 124, Ctrl-C 130, a failed job 1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from geofed.errors import JobFailed, UserError
from geofed.launch import job as launch
from geofed.progress import PREFIX
from geofed.testbed import host

LOG_DIR = Path("geofed-out/logs")


@contextmanager
def work_directory(what: str, hostfile: str | None):
    """A directory this process and every rank of a job read and write, removed afterwards:
    on a real cluster (a hostfile, or inside Slurm) the current directory, shared as for
    any MPI job; on the testbed every node sees this host's /tmp."""
    shared = bool(hostfile or os.environ.get("SLURM_JOB_ID"))
    with tempfile.TemporaryDirectory(prefix=f".geofed-{what}-" if shared else f"geofed-{what}-",
                                     dir="." if shared else None) as tmp:
        yield Path(tmp).resolve()


def command(job: launch.Job, hostfile: str | None = None, check_up: bool = True) -> launch.Command:
    """The launch command of `job`: srun inside a Slurm allocation (the testbed's own
    Slurm, or a real one with a hostfile), mpiexec over ssh with a hostfile, else the
    testbed (which must be up unless only printing)."""
    if os.environ.get("SLURM_JOB_ID"):
        return launch.slurm_command(job, hostfile, Path.cwd())
    if hostfile:
        return launch.hostfile_command(job, hostfile)
    if check_up:
        from geofed.testbed import core
        core.require_up(job.fed, job.nodes())
    return launch.testbed_command(job)


class Running:
    """A started job; its output goes to `log` (and to stdout too when `echo`). `cwd`
    is mpiexec's working directory, which Hydra gives every rank."""

    def __init__(self, job: launch.Job, cmd: launch.Command, log: Path, echo: bool = False,
                 cwd: str | Path | None = None):
        self.job, self.cmd, self.log, self.echo = job, cmd, log, echo
        self.showing = True
        self.stopped = False
        self.result: Path | None = None  # where rank 0 of a rank program writes its result (ranks_started)
        for path, content in cmd.files.items():
            Path(path).write_text(content)
        self._log = open(log, "wb")
        self.since = time.time()  # what MPICH leaves in /dev/shm from now on may be this job's
        self.proc = subprocess.Popen(cmd.argv, env=dict(os.environ, **cmd.env), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=cwd)
        self._copier = threading.Thread(target=self._copy, name=f"geofed-log-{job.id}", daemon=True)
        self._copier.start()

    def _copy(self) -> None:
        prefix = PREFIX.encode()
        for line in self.proc.stdout:
            self._log.write(line)
            self._log.flush()
            if not self.showing:
                continue
            if self.echo:
                sys.stdout.buffer.write(line)
                sys.stdout.flush()
            elif line.startswith(prefix):
                sys.stderr.buffer.write(line)
                sys.stderr.flush()

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        """The job's exit status; 124 after stopping it at `timeout`. Ctrl-C stops it
        and raises KeyboardInterrupt again."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            return 124
        except KeyboardInterrupt:
            self.stop()
            raise
        # mpiexec is gone; a rank it lost track of may not be. What the job wrote before
        # it ended may still be in the pipe: it is shown, not cut off mid-output.
        self.stop(quiet=False)
        return rc

    def stop(self, quiet: bool = True) -> None:
        """Stop everything of the job, then close the log; once, and not cut short by Ctrl-C.
        `quiet`: from now on output goes to the log only (MPI's abort noise after a failure)."""
        if self.stopped:
            return
        with host.interrupt_after():
            self.showing = not quiet
            launch.stop(self.proc, self.job, self.since)
            self._copier.join(timeout=10)
            self.proc.stdout.close()
            self._log.close()
            for path in self.cmd.files:
                Path(path).unlink(missing_ok=True)
            self.stopped = True

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def keep_log(self, what: str) -> Path:
        """Copy the log where the user finds it after a failure."""
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        kept = LOG_DIR / f"{what.replace(' ', '-')}-{self.job.id}.log"
        shutil.copyfile(self.log, kept)
        return kept

    def failure(self, what: str, rc: int, timeout: float | None) -> JobFailed:
        """One line: what failed, why (the ranks' last error line) and where the log is."""
        kept = self.keep_log(what)
        if rc == 124:
            return JobFailed(f"{what}: no result within --timeout {timeout:g} s (a hang, or a link too slow for "
                             f"the sizes asked); the job was stopped; log: {kept}", status=124, log=kept)
        return JobFailed(f"{what}: the job ended with status {rc}{last_error(self.output())}; log: {kept}",
                         exit_status=rc, log=kept)

    def rank_result(self, rc: int, what: str, timeout: float | None) -> dict:
        """Rank 0's result of a rank program that ended with `rc`, read once. A request its
        ranks refused is UserError; any other failure, or no result, JobFailed (log kept)."""
        if rc == 2 and not self.result.exists():
            raise UserError(f"{what}: the ranks rejected the request{last_error(self.output())}")
        if rc != 0 or not self.result.exists():
            raise self.failure(what, rc, timeout)
        return json.loads(self.result.read_text())


def last_error(output: str) -> str:
    """The last line a rank printed that says what went wrong, to quote in one line."""
    for line in reversed(output.splitlines()):
        text = line.strip()
        if "error" in text.lower() and not text.startswith("=") and len(text) < 400:
            return f" ({text})"
    return ""


def start(job: launch.Job, log: Path, *, hostfile: str | None = None, echo: bool = False,
          cwd: str | Path | None = None) -> Running:
    """Start `job`; call inside host.interrupt_after() and keep the result where a stop finds it."""
    return Running(job, command(job, hostfile), log, echo, cwd)


@contextmanager
def started(job: launch.Job, log: Path, *, hostfile: str | None = None, echo: bool = False,
            cwd: str | Path | None = None):
    """A running job for the block; stopped when the block ends, however it ends."""
    running = None
    try:
        with host.interrupt_after():
            running = start(job, log, hostfile=hostfile, echo=echo, cwd=cwd)
        yield running
    finally:
        if running is not None:
            running.stop()


def run(job: launch.Job, *, what: str, hostfile: str | None = None, timeout: float | None = None,
        echo: bool = False) -> str:
    """Run `job` to its end; its output. A failure or timeout raises JobFailed (log kept)."""
    with tempfile.TemporaryDirectory(prefix="geofed-job-") as tmp, \
            started(job, Path(tmp) / "job.log", hostfile=hostfile, echo=echo) as running:
        rc = running.wait(timeout)
        if rc != 0:
            raise running.failure(what, rc, timeout)
        return running.output()


def run_ranks(fed, placement, workload: str, params: dict, *, ranks_per_node: int = 1, hostfile: str | None = None,
              timeout: float | None = 900, cpu_limit: bool = False, echo: bool = False,
              what: str | None = None, env: dict[str, str] | None = None) -> dict:
    """Run a workload's rank program on the placement: every rank runs
    `python -m geofed.workloads WORKLOAD PARAMS RESULT` (a process boundary: the workload is
    named, not imported) and rank 0's result comes home as JSON; the one way results of
    geofed's own MPI programs come home. With `echo` the ranks' output is shown as it comes;
    `env` is set in every rank before Python starts (what a library reads as it loads).
    A request the ranks refuse is UserError; a failure or timeout JobFailed (log kept)."""
    with work_directory(workload, hostfile) as tmp:
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        with ranks_started(fed, placement, workload, params, tmp, ranks_per_node=ranks_per_node, hostfile=hostfile,
                           cpu_limit=cpu_limit, echo=echo, prefix=prefix) as running:
            rc = running.wait(timeout)
        return running.rank_result(rc, what or f"{workload} on {placement.code}", timeout)


@contextmanager
def ranks_started(fed, placement, workload: str, params: dict, directory: Path, *, log: Path | None = None,
                  ranks_per_node: int = 1, hostfile: str | None = None, cpu_limit: bool = False,
                  echo: bool = False, prefix: list[str] | tuple[str, ...] = ()):
    """run_ranks's job for the block, for rank programs that run side by side (the Gray-Scott
    workflow's parts): started, and stopped when the block ends, however it ends. Rank 0's
    result goes to `directory`, which every rank must see (work_directory); read it with
    `rank_result` once the job has ended. `prefix` comes before the interpreter (`env ...`)."""
    result = directory / f"{workload}.result.json"
    argv = [*prefix, sys.executable, "-m", "geofed.workloads", workload, json.dumps(params), str(result)]
    job = launch.Job(fed, placement, argv, ranks_per_node, cpu_limit=cpu_limit)
    with started(job, log or directory / f"{workload}.log", hostfile=hostfile, echo=echo) as running:
        running.result = result
        yield running
