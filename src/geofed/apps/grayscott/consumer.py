"""What every consumer shares: its options, its reader, its per-step rows and its result.

A consumer is an MPI program (one or more ranks, each an SST reader of its share of
the planes). `--delay` makes it slow on purpose, to show that the writer then waits
instead of dropping steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from geofed import runtime
from geofed.apps.grayscott import stream


def arguments(prog: str, doc: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    ap.add_argument("--stream", required=True, help="the stream to read (SST contact file is STREAM.sst)")
    ap.add_argument("--engine", default="SST", help="SST (default) or BP5")
    ap.add_argument("--connect-timeout", type=float, default=60.0, help="seconds to wait for the writer")
    ap.add_argument("--delay", type=float, default=0.0, help="extra seconds per step (a slow consumer, for tests)")
    ap.add_argument("--result", help="write this part's per-step timings and checksums here (JSON)")
    return ap


def open_reader(args, describe: str, fields: list[str], extras: tuple[str, ...] = ()) -> stream.Reader:
    try:
        return stream.Reader(args.stream, args.engine, fields, args.connect_timeout, describe, extras)
    except stream.ConnectTimeout as e:
        print(str(e), file=sys.stderr, flush=True)
        sys.exit(3)


def row(r: stream.Received, digest: str) -> dict:
    return {"step": r.step, "wait_s": r.wait_s, "asked": r.asked, "arrived": r.arrived, "bytes": r.bytes,
            "digest": digest}


def pause(args) -> None:
    if args.delay > 0:
        time.sleep(args.delay)


def save_result(args, part: str, rows: list[dict], ranks: int, **more) -> None:
    if args.result:
        doc = {"part": part, "ranks": ranks, "node": runtime.node(), "site": runtime.site(), "steps": rows, **more}
        Path(args.result).write_text(json.dumps(doc))


def animate(frames: list[Path], out: Path, fps: int = 5) -> Path | None:
    """An animated GIF of the PNG frames (Pillow comes with matplotlib)."""
    if not frames:
        return None
    from PIL import Image
    images = [Image.open(f) for f in frames]
    images[0].save(out, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return out


def plot_frames(args, reader: stream.Reader, part: str, stem: str, fig, draw) -> int:
    """The plotters' loop: read and check every step, draw every --every-th onto `fig`
    with `draw(step)`, save it as a PNG frame under --frames, then the animation and
    the result. Exit status 4 for a corrupt step."""
    frames_dir = Path(args.frames)
    rows, frames = [], []
    try:
        for n, r in enumerate(reader.steps()):
            if n % args.every == 0:
                draw(r)
                path = frames_dir / f"{stem}-{r.step:06d}.png"
                fig.savefig(path, dpi=72)
                frames.append(path)
            pause(args)
            rows.append(row(r, stream.digest(r.crcs)))
    except stream.CorruptStep as e:
        print(str(e), file=sys.stderr, flush=True)
        return 4
    reader.close()
    anim = animate(frames, frames_dir / f"{stem}.gif")
    save_result(args, part, rows, 1, frames=[str(f) for f in frames], animation=str(anim) if anim else None)
    return 0
