"""2-D cross-sections of U and V: a PNG frame per step and an animation.

    python -m geofed.apps.grayscott.gplot --stream gs.bp --frames DIR [--axis z --index 32]

One process reads every plane of U and V, so its checksums cover the whole step,
and draws the slice at --index (default: the middle) across --axis.
"""

from __future__ import annotations

import sys
from pathlib import Path

from geofed.apps.grayscott import consumer

AXES = "xyz"


def cross_section(f, axis: str, index: int | None):
    a = AXES.index(axis)
    i = f.shape[a] // 2 if index is None else index
    return f.take(i, axis=a), i


def main(argv: list[str] | None = None) -> int:
    ap = consumer.plotter_arguments("geofed.apps.grayscott.gplot", __doc__)
    ap.add_argument("--axis", choices=list(AXES), default="z")
    ap.add_argument("--index", type=int, help="slice index along --axis (default: the middle)")
    args = ap.parse_args(argv)
    fig, axes = consumer.u_and_v_figure(3.8)

    def pick(r):
        return {name: cross_section(r.arrays[name], args.axis, args.index) for name in ("U", "V")}

    def draw(step, picked):
        for ax, name, cmap in zip(axes, ("U", "V"), ("viridis", "magma")):
            ax.clear()
            img, i = picked[name]
            ax.imshow(img, cmap=cmap, origin="lower")
            ax.set_title(f"{name}, {args.axis} = {i}")
        fig.suptitle(f"Gray-Scott step {step}")

    drawer = consumer.FrameDrawer(fig, draw, Path(args.frames), "cross-section")  # before the stream: it forks
    reader = consumer.open_reader(args, "cross-section plot", ["U", "V"])
    return consumer.plot_frames(args, reader, "gplot", drawer, pick)


if __name__ == "__main__":
    sys.exit(main())
