"""2-D cross-sections of U and V: a PNG frame per step and an animation.

    python -m geofed.workloads grayscott-gplot '{"stream": "gs.bp", "frames": "DIR", "axis": "z"}' result.json

One process reads every plane of U and V, so its checksums cover the whole step,
and draws the slice at `index` (default: the middle) across `axis`.
"""

from __future__ import annotations

from pathlib import Path

from geofed.apps.grayscott import consumer

AXES = "xyz"


def cross_section(f, axis: str, index: int | None):
    a = AXES.index(axis)
    i = f.shape[a] // 2 if index is None else index
    return f.take(i, axis=a), i


def plot(p) -> dict:
    """The cross-section plotter (the grayscott-gplot rank program, one rank; `p` its
    parameters, geofed.workloads.grayscott_parts.GplotParams)."""
    consumer.check_plotter(p)
    fig, axes = consumer.u_and_v_figure(3.8)

    def pick(r):
        return {name: cross_section(r.arrays[name], p.axis, p.index) for name in ("U", "V")}

    def draw(step, picked):
        for ax, name, cmap in zip(axes, ("U", "V"), ("viridis", "magma")):
            ax.clear()
            img, i = picked[name]
            ax.imshow(img, cmap=cmap, origin="lower")
            ax.set_title(f"{name}, {p.axis} = {i}")
        fig.suptitle(f"Gray-Scott step {step}")

    drawer = consumer.FrameDrawer(fig, draw, Path(p.frames), "cross-section")  # before the stream: it forks
    reader = consumer.open_reader(p, "cross-section plot", ["U", "V"])
    return consumer.plot_frames(p, reader, "gplot", drawer, pick)
