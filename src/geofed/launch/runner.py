"""The one way geofed runs a program on a placement: testbed, hostfile (ssh) or srun.

Every workload, benchmark and the demo go through `run` or `run_ranks` (or `started`
and `ranks_started` for jobs that run side by side, like the Gray-Scott workflow's
parts). The runner
- checks that the testbed is up (or reads the hostfile) before anything starts;
- keeps the job's output in a log instead of the user's terminal: MPI's abort
  banners of a stopped job are not the user's business, and a failed job's log is
  kept under geofed-out/logs/ and named in the one-line error;
- shows the ranks' progress lines (those starting `geofed: `, see geofed.progress);
- stops the whole job on timeout, the first rank that fails (its wrapper,
  geofed.launch.rank, says so on stderr) or Ctrl-C: mpiexec, its proxies, every rank
  (found by the job id in its environment, also in other namespaces) and the MPICH
  shared-memory files those ranks had mapped.
Exit statuses (docs/launch.md): timeout 124, Ctrl-C 130, a failed job 1, a program
a rank cannot find 2.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from geofed.errors import JobFailed, UserError
from geofed.launch import job as launch
from geofed.launch import mpi
from geofed.launch import rank
from geofed.progress import PREFIX
from geofed.testbed import host

LOG_DIR = Path("geofed-out/logs")
# `geofed run`'s time limit when none is given: a failed rank ends a job at once, so
# this only stops a program that hangs (docs/launch.md).
RUN_TIMEOUT_S = 3600.0


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
    mpi.announce()
    if os.environ.get("SLURM_JOB_ID"):
        return launch.slurm_command(job, hostfile, Path.cwd())
    if hostfile:
        return launch.hostfile_command(job, hostfile)
    if check_up:
        from geofed.testbed import core
        core.require_up(job.fed, job.nodes())
    return launch.testbed_command(job)


class Running:
    """A started job; its output goes to `log` (and to the terminal too when `echo`:
    the ranks' stdout to stdout, their stderr to stderr). `cwd` is mpiexec's working
    directory, which Hydra gives every rank. The first rank that fails (geofed.launch.rank
    reports it, MPICH's MPI_Abort names it) is kept in `failed`, and the job counts as
    ended: what follows is MPI's noise about the others, which goes to the log only.
    Hydra's own lines never reach the terminal."""

    def __init__(self, job: launch.Job, cmd: launch.Command, log: Path, echo: bool = False,
                 cwd: str | Path | None = None):
        self.job, self.cmd, self.log, self.echo = job, cmd, log, echo
        self.showing = True
        self.stopped = False
        self.failed: RankFailure | None = None
        self._failed_at = 0  # how much of the log was written when the failure was reported
        self._in_banner = False
        self._ended = threading.Event()
        self.result: Path | None = None  # where rank 0 of a rank program writes its result (ranks_started)
        for path, content in cmd.files.items():
            Path(path).write_text(content)
        self._log = open(log, "wb")
        self.since = time.time()  # what MPICH leaves in /dev/shm from now on may be this job's
        self.proc = subprocess.Popen(cmd.argv, env=dict(os.environ, **cmd.env), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                     cwd=cwd)
        self._copier = threading.Thread(target=self._copy, name=f"geofed-log-{job.id}", daemon=True)
        self._copier.start()
        self._waiter = threading.Thread(target=self._wait_end, name=f"geofed-wait-{job.id}", daemon=True)
        self._waiter.start()

    def _wait_end(self) -> None:
        self.proc.wait()
        self._ended.set()

    def _copy(self) -> None:
        """Copy both streams, line by line, to the log and where they belong."""
        streams = {self.proc.stdout: sys.stdout.buffer, self.proc.stderr: sys.stderr.buffer}
        partial = {f: b"" for f in streams}
        with selectors.DefaultSelector() as sel:
            for f in streams:
                sel.register(f, selectors.EVENT_READ)
            while sel.get_map():
                # What the ranks wrote to stdout before a failure report read in the
                # same round is theirs to show; after the report, nothing is.
                for f in sorted((key.fileobj for key, _ in sel.select()), key=lambda f: f is self.proc.stderr):
                    chunk = os.read(f.fileno(), 65536)
                    if chunk:
                        *lines, partial[f] = (partial[f] + chunk).split(b"\n")
                        lines = [line + b"\n" for line in lines]
                    else:
                        sel.unregister(f)
                        lines = [partial[f]] if partial[f] else []
                    for line in lines:
                        self._line(line, streams[f], f is self.proc.stderr)

    def _line(self, line: bytes, terminal, is_stderr: bool) -> None:
        """Log a line and show it where it belongs. Hydra's own lines (its banner about
        a dead rank, its diagnostics) go to the log only; so does everything after a
        rank's failure report (the others' complaints that their peer is gone), and the
        report itself is taken, not shown."""
        self._log.write(line)
        self._log.flush()
        failure = RankFailure.parse(line, self.job) if is_stderr else None
        if failure is not None:
            end = line.find(rank.END.encode())
            if end > 0 and self.failed is None:  # the program's last words, without a newline
                self._show(line[:end] + b"\n", terminal)
            if self.failed is None:
                self.failed, self._failed_at = failure, self._log.tell()
                self._ended.set()
        elif not self._hydra_says(line) and self.failed is None:
            self._show(line, terminal)

    def _hydra_says(self, line: bytes) -> bool:
        """Whether `line` is Hydra's, not a rank's: a line of its banner or a diagnostic."""
        if HYDRA_BANNER_EDGE.fullmatch(line.rstrip()):
            self._in_banner = not self._in_banner
            return True
        return self._in_banner or HYDRA_LINE.match(line) is not None

    def _show(self, line: bytes, terminal) -> None:
        if not self.showing:
            return
        if self.echo:
            terminal.write(line)
            terminal.flush()
        elif line.startswith(PREFIX.encode()):
            sys.stderr.buffer.write(line)
            sys.stderr.flush()

    def poll(self) -> int | None:
        """The job's exit status once it ended: that of its first failed rank, if any."""
        if self.failed is not None:
            return self.failed.exit_status
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        """The job's exit status; 124 after stopping it at `timeout`. A rank that fails
        ends the job at once. Ctrl-C stops it and raises KeyboardInterrupt again."""
        try:
            ended = self._ended.wait(timeout)
        except KeyboardInterrupt:
            self.stop()
            raise
        if not ended:
            self.stop()
            return 124
        # mpiexec is gone, or a rank failed and the others may wait for it; a rank mpiexec
        # lost track of may be left. What the job wrote before it ended may still be in
        # the pipe: it is shown, not cut off mid-output (a failed rank's report too).
        self.stop(quiet=False)
        return self.poll()

    def stop(self, quiet: bool = True) -> None:
        """Stop everything of the job, then close the log; once, and not cut short by Ctrl-C.
        `quiet`: from now on output goes to the log only (MPI's abort noise after a failure)."""
        if self.stopped:
            return
        with host.interrupt_after():
            if quiet:
                self.showing = False
            launch.stop(self.proc, self.job, self.since)
            self._copier.join(timeout=10)
            self.proc.stdout.close()
            self.proc.stderr.close()
            self._log.close()
            for path in self.cmd.files:
                Path(path).unlink(missing_ok=True)
            self.stopped = True

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def keep_log(self, what: str) -> Path:
        """Copy the log where the user finds it after a failure."""
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        # `what` may name the program by its path and arguments: a file name of its words,
        # short enough for any file system (a profile of /x/prog once had no log, a traceback)
        name = re.sub(r"[^\w.=+-]+", "-", what).strip("-")[:100]
        kept = LOG_DIR / f"{name}-{self.job.id}.log"
        shutil.copyfile(self.log, kept)
        return kept

    def failure(self, what: str, rc: int, timeout: float | None) -> JobFailed | UserError:
        """One line: what failed, why (which rank, on which node, how; the ranks' last
        error line) and where the log is. A program a rank cannot find is the user's
        input (UserError)."""
        if self.failed is not None and self.failed.missing:
            return UserError(f"{what}: {self.failed.describe()}")
        kept = self.keep_log(what)
        if rc == 124:
            return JobFailed(f"{what}: no result within --timeout {timeout:g} s (a hang, or a link too slow for "
                             f"the sizes asked); the job was stopped; log: {kept}", status=124, log=kept)
        if self.failed is None:
            return JobFailed(f"{what}: the job ended with status {rc}{last_error(self.output())}; log: {kept}",
                             exit_status=rc, log=kept)
        said = last_error(self.log.read_bytes()[:self._failed_at].decode(errors="replace"))
        return JobFailed(f"{what}: {self.failed.describe()}{said}; log: {kept}", exit_status=rc, log=kept)

    def rank_result(self, rc: int, what: str, timeout: float | None) -> dict:
        """Rank 0's result of a rank program that ended with `rc`, read once. A request its
        ranks refused is UserError; any other failure, or no result, JobFailed (log kept)."""
        if rc == 2 and not self.result.exists():
            raise UserError(f"{what}: the ranks rejected the request{last_error(self.output())}")
        if rc != 0 or not self.result.exists():
            raise self.failure(what, rc, timeout)
        return json.loads(self.result.read_text())


@dataclass(frozen=True)
class RankFailure:
    """How the first failing rank of a job ended: its exit status, the signal that
    killed it, MPI_Abort's error code, or the program it could not find."""
    rank: int | None
    node: str | None
    status: int = 0  # > 0 exit status, < 0 killed by that signal
    aborted: bool = False  # it called MPI_Abort with `status`
    missing: str | None = None
    path: str = ""

    @classmethod
    def parse(cls, line: bytes, job: launch.Job) -> RankFailure | None:
        """The failure a line of the job's stderr reports, if it reports one."""
        text = line.decode(errors="replace")
        if rank.END in text:
            try:
                said = json.loads(text.split(rank.END, 1)[1])
            except ValueError:
                return None
            return cls(said.get("rank"), said.get("node"), said.get("status", 0), missing=said.get("missing"),
                       path=said.get("path", ""))
        abort = MPICH_ABORT.search(text)
        if abort:  # the rank's wrapper is killed with the job before it could say so
            r = int(abort["rank"])
            nodes = job.nodes()
            node = nodes[r // job.ranks_per_node].name if r < job.ranks() else None
            return cls(r, node, int(abort["code"]), aborted=True)
        return None

    @property
    def exit_status(self) -> int:
        return self.status if self.status >= 0 else 128 - self.status

    def describe(self) -> str:
        who = f"rank {self.rank} on node {self.node}"
        if self.missing:
            return f"{who} cannot start {self.missing!r}: no such program in its PATH ({self.path})"
        if self.aborted:
            return f"{who} exited with status {self.status} (MPI_Abort)"
        if self.status < 0:
            return f"{who} was killed by {signal.Signals(-self.status).name}"
        return f"{who} exited with status {self.status}"


# Hydra's banner about a rank that died (a block between two lines of '='), its
# diagnostics, which name their source (`[mpiexec@host]`, `[proxy:0@host]`; Open MPI's
# `[host:pid]`), and its words about a job it saw killed.
HYDRA_BANNER_EDGE = re.compile(rb"={40,}|-{40,}")  # Open MPI draws its with dashes
OPENMPI_NOTICE_EDGE = re.compile(r"-{40,}")
HYDRA_LINE = re.compile(rb"\[(mpiexec|proxy:\d+)@[^]]*\] |\[[^]\s]+:\d+\] |"
                        rb"YOUR APPLICATION TERMINATED WITH THE EXIT STRING: |"
                        rb"This typically refers to a problem with your application\.|"
                        rb"Please see the FAQ page for debugging suggestions")
# MPICH's own line when a rank calls MPI_Abort.
MPICH_ABORT = re.compile(r"Abort\((?P<code>-?\d+)\) on node \d+ \(rank (?P<rank>\d+) in comm \d+\)")


def last_error(output: str) -> str:
    """The last line a rank printed that says what went wrong, to quote in one line. Open
    MPI's notices (between lines of dashes: a peer that went away, say) are not the rank's."""
    in_notice = False
    for line in reversed(output.splitlines()):
        text = line.strip()
        if OPENMPI_NOTICE_EDGE.fullmatch(text):
            in_notice = not in_notice
        elif "error" in text.lower() and not text.startswith("=") and len(text) < 400 and not in_notice:
            return f" ({text})"
    return ""


def run_timeout(given: float | None) -> float | None:
    """The time limit of a user's program: the one given; else inside a Slurm allocation
    none (the allocation's own limit stops it), else RUN_TIMEOUT_S."""
    if given is not None or os.environ.get("SLURM_JOB_ID"):
        return given
    return RUN_TIMEOUT_S


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
        echo: bool = False, cwd: str | Path | None = None) -> str:
    """Run `job` to its end (in `cwd`); its output. A failure or timeout raises JobFailed (log kept)."""
    with tempfile.TemporaryDirectory(prefix="geofed-job-") as tmp, \
            started(job, Path(tmp) / "job.log", hostfile=hostfile, echo=echo, cwd=cwd) as running:
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
