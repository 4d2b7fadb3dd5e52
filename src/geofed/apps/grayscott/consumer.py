"""What every consumer shares: its checks, its reader, its per-step rows and its result.

A consumer is a rank program (geofed.workloads.grayscott_parts: one or more ranks,
each an SST reader of its share of the planes). Its `delay` makes it slow on purpose,
to show that the writer then waits instead of dropping steps.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import time
from pathlib import Path

from geofed import runtime
from geofed.apps.grayscott import stream
from geofed.errors import JobFailed, UserError

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def check_plotter(p) -> None:
    """Refuse a plotter's request that cannot be drawn, before anything starts."""
    if not p.frames:
        raise UserError("--frames: a directory for the frames is needed")
    if p.every < 1:
        raise UserError(f"--every: draw every n-th step with n at least 1, got {p.every}")


def u_and_v_figure(height: float):
    """The figure a plotter draws U and V on, side by side, and its two axes. matplotlib
    is imported here, without a display: the analysis consumer does not need it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt.subplots(1, 2, figsize=(8, height))


def open_reader(p, describe: str, fields: list[str], extras: tuple[str, ...] = ()) -> stream.Reader:
    """The part's reader of `p.stream`; a stream that does not open is status 3."""
    if not p.stream:
        raise UserError(f"{describe}: --stream: the stream to read is needed")
    try:
        return stream.Reader(p.stream, p.engine, fields, p.connect_timeout, describe, extras)
    except stream.ConnectTimeout as e:
        raise JobFailed(str(e), status=3) from None


def row(r: stream.Received, digest: str) -> dict:
    return {"step": r.step, "wait_s": r.wait_s, "asked": r.asked, "arrived": r.arrived, "bytes": r.bytes,
            "digest": digest}


def pause(p) -> None:
    if p.delay > 0:
        time.sleep(p.delay)


def result(part: str, rows: list[dict], ranks: int, **more) -> dict:
    """What a consumer returns: where it ran and its per-step rows."""
    return {"part": part, "ranks": ranks, "node": runtime.node(), "site": runtime.site(), "steps": rows, **more}


def animate(frames: list[Path], out: Path, fps: int = 5) -> Path | None:
    """An animated GIF of the PNG frames (Pillow comes with matplotlib)."""
    if not frames:
        return None
    from PIL import Image
    images = [Image.open(f) for f in frames]
    images[0].save(out, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return out


class FrameDrawer:
    """Draws and saves the frames in a child process at the lowest CPU priority, so that
    drawing (0.1 s of matplotlib per frame here, 0.25 s under a node's 0.4-core quota)
    never holds back reading. Drawn in the read loop, a frame made the plotter ask for
    the next step late, and it fell behind the simulation; a thread did not cure it,
    since ADIOS2's BeginStep keeps the GIL while it waits for a step, and a thread shares
    the plotter's CPU priority. Start it before the stream is opened: it is forked, and
    must not inherit ADIOS2's threads. `draw(step, picked)` draws onto `fig`."""

    def __init__(self, fig, draw, frames_dir: Path, stem: str):
        self.frames_dir, self.stem = frames_dir, stem
        frames_dir.mkdir(parents=True, exist_ok=True)
        self.frames: list[Path] = []
        ctx = multiprocessing.get_context("fork")
        self.todo = ctx.SimpleQueue()
        self.process = ctx.Process(target=self._draw_frames, args=(fig, draw), name=f"geofed-frames-{stem}",
                                   daemon=True)
        self.process.start()
        os.setpriority(os.PRIO_PROCESS, self.process.pid, 19)

    def path(self, step: int) -> Path:
        return self.frames_dir / f"{self.stem}-{step:06d}.png"

    def put(self, step: int, picked) -> None:
        """Queue a frame; returns at once."""
        self.todo.put((step, picked))
        self.frames.append(self.path(step))

    def _draw_frames(self, fig, draw) -> None:
        die_with_parent()
        while (item := self.todo.get()) is not None:
            step, picked = item
            draw(step, picked)
            fig.savefig(self.path(step), dpi=72)

    def finish(self) -> list[Path]:
        """Wait for the queued frames; their paths, or FrameError."""
        self.todo.put(None)
        self.process.join()
        if self.process.exitcode != 0:
            raise FrameError(f"drawing the frames failed (exit status {self.process.exitcode}); "
                             f"{len([f for f in self.frames if f.exists()])} of {len(self.frames)} drawn")
        return self.frames


class FrameError(RuntimeError):
    pass


def die_with_parent() -> None:
    """Ask the kernel to end this process when its parent ends (PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the parent was gone before the request
        os._exit(1)


def plot_frames(p, reader: stream.Reader, part: str, drawer: FrameDrawer, pick) -> dict:
    """The plotters' loop: read and check every step; of every --every-th, `pick(step)`
    takes what its frame needs (a slice: small) and hands it to the drawer; then the
    animation and the result. Status 4 for a corrupt step, 5 when drawing failed."""
    rows = []
    try:
        for n, r in enumerate(reader.steps()):
            if n % p.every == 0:
                drawer.put(r.step, pick(r))
            pause(p)
            rows.append(row(r, stream.digest(r.crcs)))
    except stream.CorruptStep as e:
        raise JobFailed(str(e), status=4) from None
    reader.close()
    try:
        frames = drawer.finish()
    except FrameError as e:
        raise JobFailed(f"{reader.describe}: {e}", status=5) from None
    anim = animate(frames, drawer.frames_dir / f"{drawer.stem}.gif")
    return result(part, rows, 1, frames=[str(f) for f in frames], animation=str(anim) if anim else None)
