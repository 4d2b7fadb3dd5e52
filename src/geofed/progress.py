"""Progress of long commands: one helper for every command and rank.

Lines go to stderr with a `geofed: ` prefix, so a job runner can pick them out of
a rank's output (launch/runner.py shows only those) and results on stdout stay clean.
A fraction-done `Bar` redraws one line on a terminal and writes a plain line every
10 % in a log; runs shorter than a few seconds show nothing.
"""

from __future__ import annotations

import sys
import time

PREFIX = "geofed: "


def progress(msg: str) -> None:
    print(PREFIX + msg, file=sys.stderr, flush=True)


class Bar:
    """Call with the fraction done (0-1); `what` names the work ("mdfs rank 0: tuples")."""

    WIDTH = 30

    def __init__(self, what: str, after: float = 3.0, stream=None):
        self.what = what
        self.after = after
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.t0 = time.perf_counter()
        self.next = 0.1
        self.drawn = False

    def __call__(self, frac: float) -> None:
        frac = min(max(frac, 0.0), 1.0)
        elapsed = time.perf_counter() - self.t0
        if elapsed < self.after:
            return
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        text = f"{self.what}: {100 * frac:3.0f} %, {elapsed:.1f} s" + (f", about {eta:.0f} s left" if frac < 1 else "")
        if self.tty:
            filled = int(self.WIDTH * frac)
            self.stream.write(f"\r{PREFIX}[{'#' * filled}{' ' * (self.WIDTH - filled)}] {text}\033[K")
            if frac >= 1:
                self.stream.write("\n")
            self.stream.flush()
            self.drawn = frac < 1
        elif frac >= self.next or frac >= 1:
            print(PREFIX + text, file=self.stream, flush=True)
            while self.next <= frac:
                self.next += 0.1

    def close(self) -> None:
        """End a redrawn line that did not reach 100 %, so the next output starts clean."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False
