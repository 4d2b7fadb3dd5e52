"""Errors a user can cause and fix; the CLI prints them as one line and exits 2."""


class UserError(Exception):
    """Bad input: a file, a flag or an environment the user controls.

    The message names what is wrong and where, so it is printed as is with no traceback.
    """


class JobFailed(Exception):
    """A job that started and did not deliver: it crashed, hung past its timeout, or
    its ranks reported an error. The CLI prints the message as one line, the log's
    path in it, and exits with `status` (1, or 124 for a timeout)."""

    def __init__(self, message: str, status: int = 1, exit_status: int | None = None, log=None):
        super().__init__(message)
        self.status = status
        self.exit_status = exit_status  # the job's own exit status, when it ended by itself
        self.log = log


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, systemd's stop, Slurm's end of a job): handled as Ctrl-C is, so every
    cleanup that a Ctrl-C runs also runs for it; the CLI then exits 143 instead of 130."""


def raise_terminated(*_) -> None:
    raise Terminated
