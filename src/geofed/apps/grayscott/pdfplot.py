"""PDF plots: the PDFs of U and V of one slice, a PNG frame per step and an animation.

    python -m geofed.apps.grayscott.pdfplot --stream pdf.bp --frames DIR [--slice 32]
"""

from __future__ import annotations

import sys
from pathlib import Path

from geofed.apps.grayscott import consumer, stream


def main(argv: list[str] | None = None) -> int:
    ap = consumer.arguments("geofed.apps.grayscott.pdfplot", __doc__)
    ap.add_argument("--frames", required=True, help="directory for the PNG frames and the animation")
    ap.add_argument("--slice", type=int, help="which slice's PDF to draw (default: the middle)")
    ap.add_argument("--every", type=int, default=1, help="draw every n-th step (all are read and checked)")
    args = ap.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frames_dir = Path(args.frames)
    frames_dir.mkdir(parents=True, exist_ok=True)
    reader = consumer.open_reader(args, "pdf plot", ["U/pdf", "V/pdf"], extras=("U/bins", "V/bins"))
    rows, frames = [], []
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    try:
        for n, r in enumerate(reader.steps()):
            if n % args.every == 0:
                i = r.arrays["U/pdf"].shape[0] // 2 if args.slice is None else args.slice
                for ax, name in zip(axes, ("U", "V")):
                    ax.clear()
                    edges = r.arrays[f"{name}/bins"]
                    ax.stairs(r.arrays[f"{name}/pdf"][i], edges, fill=True)
                    ax.set_xlabel(name)
                    ax.set_ylabel("probability density")
                fig.suptitle(f"PDFs of slice {i}, step {r.step}")
                fig.tight_layout()
                path = frames_dir / f"pdf-{r.step:06d}.png"
                fig.savefig(path, dpi=72)
                frames.append(path)
            consumer.pause(args)
            rows.append(consumer.row(r, stream.digest(r.crcs)))
    except stream.CorruptStep as e:
        print(str(e), file=sys.stderr, flush=True)
        return 4
    reader.close()
    anim = consumer.animate(frames, frames_dir / "pdf.gif")
    consumer.save_result(args, "pdfplot", rows, 1, frames=[str(f) for f in frames], animation=str(anim) if anim else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
