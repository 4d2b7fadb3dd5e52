"""PDF analysis: per-slice histograms of U and V for every step, as a stream or a file.

    python -m geofed.workloads grayscott-pdf '{"stream": "gs.bp", "out_stream": "pdf.bp", "bins": 100}' result.json

Each rank reads its share of the slices (planes along the first axis). The bins of
a step span the step's global minimum to maximum of the field (an Allreduce), the
same bins for every slice, so slices can be compared; each slice's histogram is
normalised to a probability density. Rank 0 gathers the slices and writes U/pdf and
V/pdf (slices x bins) with their bin edges U/bins and V/bins (and the step) to
`out_stream`, and with `out_file` to a BP5 file as well: the variables of the ADIOS2
tutorial's pdf_calc, readable with bpls or adios2's Python API afterwards.
"""

from __future__ import annotations

import shutil
import time

import numpy as np
from mpi4py import MPI

from geofed.apps.grayscott import consumer, stream
from geofed.errors import JobFailed, UserError


def slice_pdfs(f: np.ndarray, lo: float, hi: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Density histogram of every slice f[i] over the same `bins` bins spanning [lo, hi]."""
    edges = np.linspace(lo, hi, bins + 1)
    width = (hi - lo) / bins if hi > lo else 1.0
    flat = f.reshape(f.shape[0], -1)
    idx = np.clip(((flat - lo) / width).astype(np.int64), 0, bins - 1)
    idx += np.arange(f.shape[0])[:, None] * bins
    counts = np.bincount(idx.ravel(), minlength=f.shape[0] * bins).reshape(f.shape[0], bins)
    return counts / (flat.shape[1] * width), edges


def open_outputs(p, planes: int) -> list[stream.Writer]:
    """The writers of the PDFs (planes x bins per field, and the bin edges): to the
    plotter's stream and/or the BP5 file."""
    shapes = {"U/pdf": (planes, p.bins), "V/pdf": (planes, p.bins)}
    bins = {"U/bins": (p.bins + 1,), "V/bins": (p.bins + 1,)}
    return [stream.Writer(path, engine, p.out_readers, shapes, p.connect_timeout, "pdf analysis", extras=bins)
            for path, engine in ((p.out_stream, p.out_engine), (p.out_file, "BP5")) if path]


def analyse(comm, p) -> dict | None:
    """The PDF analysis's ranks (the grayscott-pdf rank program; `p` its parameters,
    geofed.workloads.grayscott_parts.PdfParams): rank 0 returns the per-step rows."""
    if p.bins < 1:
        raise UserError(f"--bins: at least 1, got {p.bins}")
    rank, size = comm.Get_rank(), comm.Get_size()
    writers = open_outputs(p, p.planes) if rank == 0 and p.planes else None
    reader = consumer.open_reader(p, f"pdf analysis (rank {rank})", ["U", "V"])
    rows = []
    try:
        for r in reader.steps((rank, size)):
            t0 = time.perf_counter()
            pdfs, edges = {}, {}
            for name in ("U", "V"):
                f = r.arrays[name]
                lo = comm.allreduce(float(f.min()), MPI.MIN)
                hi = comm.allreduce(float(f.max()), MPI.MAX)
                pdfs[name], edges[name] = slice_pdfs(f, lo, hi, p.bins)
            consumer.pause(p)
            parts = comm.gather((pdfs, r.crcs, r.wait_s, r.asked, r.arrived, r.bytes), root=0)
            if rank != 0:
                continue
            crcs = np.concatenate([x[1] for x in parts], axis=1)
            out = {f"{n}/pdf": np.concatenate([x[0][n] for x in parts]) for n in ("U", "V")}
            analysis_s = time.perf_counter() - t0
            stage_s, out_digest = 0.0, None
            planes = out["U/pdf"].shape[0]
            if writers is None:  # the first step gives the plane count
                writers = open_outputs(p, planes)
            elif p.planes and planes != p.planes:
                for w in writers:
                    w.close()
                if p.out_file:  # empty: nothing was written to it
                    shutil.rmtree(p.out_file, ignore_errors=True)
                raise UserError(f"pdf analysis: --planes {p.planes}, but step {r.step} of {p.stream} has "
                                f"{planes} planes")
            for w in writers:
                written = w.write(r.step, {**out, "U/bins": edges["U"], "V/bins": edges["V"]})
                stage_s, out_digest = stage_s + written.stage_s, written.digest
            # The step is asked for when the last rank asks, and in when the last rank has its share.
            rows.append({"step": r.step, "wait_s": max(x[2] for x in parts), "asked": max(x[3] for x in parts),
                         "arrived": max(x[4] for x in parts), "bytes": sum(x[5] for x in parts),
                         "digest": stream.digest(crcs),
                         "analysis_s": analysis_s, "stage_s": stage_s, "out_digest": out_digest})
    except stream.CorruptStep as e:
        raise JobFailed(str(e), status=4) from None
    reader.close()
    for w in writers or []:
        w.close()
    return consumer.result("pdf", rows, size, bins=p.bins) if rank == 0 else None
