"""What every rank of a job runs first: `python -m geofed.launch.rank PROGRAM ARGS...`.

It starts the program as its child, waits, and exits as the program did. When the
program fails (a non-zero status, a signal) or cannot be started, it first writes one
line, `END` and a JSON object (the rank, its node, the status or signal, or the
program that is missing), to the job's stderr: the runner reads it, ends the whole
job at once and names that rank in its one-line error. MPI alone would not end it:
the wrapper keeps the rank's PMI connection open, so Hydra does not see the program
die, and a Python rank that raised or called sys.exit(1) would wait in MPI_Finalize
for ranks that wait for it.

So a Python program run by geofed's own Python goes through geofed.launch.script,
which ends the process at once when the program fails (docs/launch.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path

END = "geofed-rank-end "
SCRIPT = "geofed.launch.script"
# Signals the launcher sends to stop a job; the program gets them in the wrapper's place.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
PYTHON = re.compile(r"python[0-9.]*")
# Options of the interpreter that take the next word as their value.
PYTHON_VALUE_OPTIONS = {"-W", "-X", "--check-hash-based-pycs"}


def as_script(argv: list[str], resolved: str) -> list[str]:
    """`argv` with `-m geofed.launch.script` before the program when it runs geofed's own
    Python (which can import it); anything else as it is."""
    if Path(resolved).parent != Path(sys.executable).parent or not PYTHON.fullmatch(Path(resolved).name):
        return argv
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-", "-c", "-m"):
        i += 2 if argv[i] in PYTHON_VALUE_OPTIONS else 1
    if i >= len(argv) or argv[i] == "-":
        return argv  # the interactive interpreter, or a program on stdin
    return argv[:i] + ["-m", SCRIPT] + argv[i:]


def report(**how) -> None:
    """One line for the runner: this rank, its node and how its program ended."""
    from geofed import runtime
    rank = next((os.environ[k] for k in ("PMI_RANK", "PMIX_RANK", "SLURM_PROCID") if k in os.environ), None)
    line = END + json.dumps({"rank": None if rank is None else int(rank), "node": runtime.node(), **how})
    # One write: the line is not torn by the program's own output to the same pipe.
    os.write(2, (line + "\n").encode())


def main(argv: list[str]) -> int:
    if not argv:
        sys.exit("usage: python -m geofed.launch.rank PROGRAM ARGS...")
    resolved = shutil.which(argv[0])
    if resolved is None:
        report(status=127, missing=argv[0], path=os.environ.get("PATH", ""))
        return 127
    argv = as_script(argv, resolved)
    wrapper = os.getpid()
    child = os.fork()
    if child == 0:
        _exec(resolved, argv, wrapper)
    for sig in FORWARDED:
        signal.signal(sig, lambda sig, _frame: _forward(child, sig))
    _, wait_status = os.waitpid(child, 0)
    status = os.waitstatus_to_exitcode(wait_status)  # -N: killed by signal N
    if status:
        report(status=status)
    return status if status >= 0 else 128 - status


def _forward(child: int, sig: int) -> None:
    try:
        os.kill(child, sig)
    except ProcessLookupError:  # it has ended and is reaped: the wrapper is about to exit too
        pass


def _exec(program: str, argv: list[str], wrapper: int) -> None:
    """In the child: die with the wrapper (a launcher may SIGKILL it), then become the program."""
    import ctypes
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != wrapper:  # the wrapper died before the line above
        os._exit(128 + signal.SIGKILL)
    try:
        os.execv(program, argv)
    except OSError as e:
        os.write(2, f"{argv[0]}: {e.strerror}\n".encode())
        os._exit(126)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
