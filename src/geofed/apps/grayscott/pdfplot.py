"""PDF plots: the PDFs of U and V of one slice, a PNG frame per step and an animation.

    python -m geofed.apps.grayscott.pdfplot --stream pdf.bp --frames DIR [--slice 32]
"""

from __future__ import annotations

import sys
from pathlib import Path

from geofed.apps.grayscott import consumer


def main(argv: list[str] | None = None) -> int:
    ap = consumer.plotter_arguments("geofed.apps.grayscott.pdfplot", __doc__)
    ap.add_argument("--slice", type=int, help="which slice's PDF to draw (default: the middle)")
    args = ap.parse_args(argv)
    fig, axes = consumer.u_and_v_figure(3.4)

    def pick(r):
        i = r.arrays["U/pdf"].shape[0] // 2 if args.slice is None else args.slice
        return i, {name: (r.arrays[f"{name}/pdf"][i], r.arrays[f"{name}/bins"]) for name in ("U", "V")}

    def draw(step, picked):
        i, pdfs = picked
        for ax, name in zip(axes, ("U", "V")):
            ax.clear()
            ax.stairs(*pdfs[name], fill=True)
            ax.set_xlabel(name)
            ax.set_ylabel("probability density")
        fig.suptitle(f"PDFs of slice {i}, step {step}")
        fig.tight_layout()

    drawer = consumer.FrameDrawer(fig, draw, Path(args.frames), "pdf")  # before the stream: it forks
    reader = consumer.open_reader(args, "pdf plot", ["U/pdf", "V/pdf"], extras=("U/bins", "V/bins"))
    return consumer.plot_frames(args, reader, "pdfplot", drawer, pick)


if __name__ == "__main__":
    sys.exit(main())
