"""PDF plots: the PDFs of U and V of one slice, a PNG frame per step and an animation.

    python -m geofed.workloads grayscott-pdfplot '{"stream": "pdf.bp", "frames": "DIR", "slice": 32}' result.json
"""

from __future__ import annotations

from pathlib import Path

from geofed.apps.grayscott import consumer


def plot(p) -> dict:
    """The PDF plotter (the grayscott-pdfplot rank program, one rank; `p` its parameters,
    geofed.workloads.grayscott_parts.PdfplotParams)."""
    consumer.check_plotter(p)
    fig, axes = consumer.u_and_v_figure(3.4)

    def pick(r):
        i = r.arrays["U/pdf"].shape[0] // 2 if p.slice is None else p.slice
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

    drawer = consumer.FrameDrawer(fig, draw, Path(p.frames), "pdf")  # before the stream: it forks
    reader = consumer.open_reader(p, "pdf plot", ["U/pdf", "V/pdf"], extras=("U/bins", "V/bins"))
    return consumer.plot_frames(p, reader, "pdfplot", drawer, pick)
