"""PDF analysis: per-slice histograms of U and V for every step, as a stream or a file.

    python -m geofed.apps.grayscott.pdf --stream gs.bp --out-stream pdf.bp [--bins 100]

Each rank reads its share of the slices (planes along the first axis). The bins of
a step span the step's global minimum to maximum of the field (an Allreduce), the
same bins for every slice, so slices can be compared; each slice's histogram is
normalised to a probability density. Rank 0 gathers the slices and writes U/pdf and
V/pdf (slices x bins) with their bin edges U/bins and V/bins (and the step) to
--out-stream, and with --out-file to a BP5 file as well: the variables of the ADIOS2
tutorial's pdf_calc, readable with bpls or adios2's Python API afterwards.
"""

from __future__ import annotations

import shutil
import sys
import time

import numpy as np
from mpi4py import MPI

from geofed.apps.grayscott import consumer, stream


def slice_pdfs(f: np.ndarray, lo: float, hi: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Density histogram of every slice f[i] over the same `bins` bins spanning [lo, hi]."""
    edges = np.linspace(lo, hi, bins + 1)
    width = (hi - lo) / bins if hi > lo else 1.0
    flat = f.reshape(f.shape[0], -1)
    idx = np.clip(((flat - lo) / width).astype(np.int64), 0, bins - 1)
    idx += np.arange(f.shape[0])[:, None] * bins
    counts = np.bincount(idx.ravel(), minlength=f.shape[0] * bins).reshape(f.shape[0], bins)
    return counts / (flat.shape[1] * width), edges


def open_outputs(args, planes: int) -> list[stream.Writer]:
    """The writers of the PDFs (planes x bins per field, and the bin edges): to the
    plotter's stream and/or the BP5 file."""
    shapes = {"U/pdf": (planes, args.bins), "V/pdf": (planes, args.bins)}
    bins = {"U/bins": (args.bins + 1,), "V/bins": (args.bins + 1,)}
    return [stream.Writer(path, engine, args.out_readers, shapes, args.connect_timeout, "pdf analysis", extras=bins)
            for path, engine in ((args.out_stream, args.out_engine), (args.out_file, "BP5")) if path]


def main(argv: list[str] | None = None) -> int:
    ap = consumer.arguments("geofed.apps.grayscott.pdf", __doc__)
    ap.add_argument("--bins", type=int, default=100)
    ap.add_argument("--out-stream", help="where to write the PDFs (omit: analyse only)")
    ap.add_argument("--out-engine", default="SST", help="SST (to the PDF plotter) or BP5 (a file)")
    ap.add_argument("--out-readers", type=int, default=1, help="SST readers of --out-stream")
    ap.add_argument("--out-file", help="also write the PDFs to this BP5 file, at this site (the tutorial's pdf.bp)")
    ap.add_argument("--planes", type=int, help="the stream's plane count (the simulation's L): opens the outputs "
                    "before the first step instead of at it, whose rendezvous with the PDF plotter would "
                    "otherwise hold up that step")
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    writers = open_outputs(args, args.planes) if rank == 0 and args.planes else None
    reader = consumer.open_reader(args, f"pdf analysis (rank {rank})", ["U", "V"])
    rows = []
    try:
        for r in reader.steps((rank, size)):
            t0 = time.perf_counter()
            pdfs, edges = {}, {}
            for name in ("U", "V"):
                f = r.arrays[name]
                lo = comm.allreduce(float(f.min()), MPI.MIN)
                hi = comm.allreduce(float(f.max()), MPI.MAX)
                pdfs[name], edges[name] = slice_pdfs(f, lo, hi, args.bins)
            consumer.pause(args)
            parts = comm.gather((pdfs, r.crcs, r.wait_s, r.asked, r.arrived, r.bytes), root=0)
            if rank != 0:
                continue
            crcs = np.concatenate([p[1] for p in parts], axis=1)
            out = {f"{n}/pdf": np.concatenate([p[0][n] for p in parts]) for n in ("U", "V")}
            analysis_s = time.perf_counter() - t0
            stage_s, out_digest = 0.0, None
            planes = out["U/pdf"].shape[0]
            if writers is None:  # the first step gives the plane count
                writers = open_outputs(args, planes)
            elif args.planes and planes != args.planes:
                print(f"pdf analysis: --planes {args.planes}, but step {r.step} of {args.stream} has {planes} "
                      f"planes", file=sys.stderr, flush=True)
                for w in writers:
                    w.close()
                if args.out_file:  # empty: nothing was written to it
                    shutil.rmtree(args.out_file, ignore_errors=True)
                comm.Abort(2)
            for w in writers:
                written = w.write(r.step, {**out, "U/bins": edges["U"], "V/bins": edges["V"]})
                stage_s, out_digest = stage_s + written.stage_s, written.digest
            # The step is asked for when the last rank asks, and in when the last rank has its share.
            rows.append({"step": r.step, "wait_s": max(p[2] for p in parts), "asked": max(p[3] for p in parts),
                         "arrived": max(p[4] for p in parts), "bytes": sum(p[5] for p in parts),
                         "digest": stream.digest(crcs),
                         "analysis_s": analysis_s, "stage_s": stage_s, "out_digest": out_digest})
    except stream.CorruptStep as e:
        print(str(e), file=sys.stderr, flush=True)
        comm.Abort(4)
    reader.close()
    for w in writers or []:
        w.close()
    if rank == 0:
        consumer.save_result(args, "pdf", rows, size, bins=args.bins)
    return 0


if __name__ == "__main__":
    sys.exit(main())
