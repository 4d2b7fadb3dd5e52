"""Staging through real ADIOS2 SST between real processes on this host (no testbed)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from geofed.apps.grayscott import pdf, stream
from geofed.native import binary
from geofed.testbed import host
from tests.conftest import run_group

PY = [*stream.preload_argv(), sys.executable]  # every SST process with EVPath's seed fix, as the workflow



@pytest.fixture(autouse=True)
def no_segment_left():
    """Tests here kill MPI ranks (a dead consumer, a writer ended early): what MPICH made
    for a rank killed while it started goes with the test."""
    import time
    since = time.time()
    yield
    for path in host.orphan_segments(since):
        Path(path).unlink(missing_ok=True)  # a job that ended meanwhile removed its own


def part(name, result, **params):
    """The argv of a part's rank program under the entry point: `grayscott-NAME`."""
    return ["-m", "geofed.workloads", f"grayscott-{name}", json.dumps(params), str(result)]


def start(argv, **kw):
    return subprocess.Popen([*PY, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_every_step_reaches_two_pdf_ranks_and_the_plotters_intact(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"L": 20, "steps": 40, "plotgap": 10}))
    gs, pdfs = str(tmp_path / "gs"), str(tmp_path / "pdf")
    t = {"connect_timeout": 60}
    parts = {
        "sim": start(part("simulation", tmp_path / "sim.json", settings=str(tmp_path / "s.json"), stream=gs,
                          readers=3, **t)),
        "pdf": subprocess.Popen([binary("mpiexec"), "-n", "2", *PY, *part("pdf", tmp_path / "pdf.json", stream=gs,
                                 out_stream=pdfs, bins=16, planes=20, **t)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        "gplot": start(part("gplot", tmp_path / "gplot.json", stream=gs, frames=str(tmp_path / "fr"), **t)),
        "pdfplot": start(part("pdfplot", tmp_path / "pdfplot.json", stream=pdfs, frames=str(tmp_path / "fr"), **t)),
    }
    try:
        for name, p in parts.items():
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, f"{name}: {err}"
    finally:
        for p in parts.values():
            p.kill()
    res = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n in parts}
    written = [(r["step"], r["digest"]) for r in res["sim"]["steps"]]
    assert [s for s, _ in written] == [10, 20, 30, 40]
    assert len(set(d for _, d in written)) == 4  # the fields change, so do the digests
    for name in ("pdf", "gplot"):
        assert [(r["step"], r["digest"]) for r in res[name]["steps"]] == written
    assert [(r["step"], r["digest"]) for r in res["pdfplot"]["steps"]] == \
        [(r["step"], r["out_digest"]) for r in res["pdf"]["steps"]]
    assert len(res["gplot"]["frames"]) == 4 and (tmp_path / "fr" / "cross-section.gif").stat().st_size > 0


def test_a_wrong_plane_count_is_one_line_and_leaves_no_file(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"L": 12, "steps": 10, "plotgap": 10}))
    gs, out = str(tmp_path / "gs"), tmp_path / "pdf.bp"
    sim = start(part("simulation", tmp_path / "sim.json", settings=str(tmp_path / "s.json"), stream=gs, readers=1,
                     connect_timeout=60))
    analysis = start(part("pdf", tmp_path / "pdf.json", stream=gs, out_engine="BP5", out_file=str(out), planes=13,
                          connect_timeout=60))
    try:
        _, err = analysis.communicate(timeout=120)
    finally:
        sim.kill(), analysis.kill()
        sim.communicate()
    assert analysis.returncode == 2
    assert f"--planes 13, but step 10 of {gs} has 12 planes" in err
    assert not out.exists()


def test_a_slow_consumer_makes_the_writer_wait_and_loses_nothing(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"L": 12, "steps": 80, "plotgap": 10}))
    gs, delay = str(tmp_path / "gs"), 0.3
    sim = start(part("simulation", tmp_path / "sim.json", settings=str(tmp_path / "s.json"), stream=gs, readers=1))
    slow = start(part("pdf", tmp_path / "pdf.json", stream=gs, delay=delay))
    try:
        for p in (sim, slow):
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
    finally:
        sim.kill(), slow.kill()
    written = json.loads((tmp_path / "sim.json").read_text())["steps"]
    got = json.loads((tmp_path / "pdf.json").read_text())["steps"]
    assert [r["digest"] for r in got] == [r["digest"] for r in written] and len(got) == 8
    # With two steps queued, the writer is held about (8 - 2) x delay in all.
    assert sum(r["stage_s"] for r in written) > 0.5 * (8 - stream.QUEUE_LIMIT) * delay


def test_no_consumer_within_the_timeout_is_a_clear_error(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"L": 12, "steps": 10, "plotgap": 10}))
    res = subprocess.run([*PY, *part("simulation", tmp_path / "sim.json", settings=str(tmp_path / "s.json"),
                                     stream=str(tmp_path / "gs"), readers=2, connect_timeout=1.5)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "no consumer connected to stream" in res.stderr and "within 1.5 s" in res.stderr


def test_a_reader_without_a_writer_names_the_stream(tmp_path):
    res = subprocess.run([*PY, *part("gplot", tmp_path / "gplot.json", stream=str(tmp_path / "nobody"),
                                     frames=str(tmp_path), connect_timeout=1)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 3
    assert "cross-section plot: cannot open stream" in res.stderr and "\x1b" not in res.stderr


def test_slice_pdfs_are_densities_on_shared_bins():
    f = np.stack([np.linspace(0, 1, 100).reshape(10, 10), np.full((10, 10), 0.25)])
    dens, edges = pdf.slice_pdfs(f, 0.0, 1.0, 4)
    assert np.allclose((dens * np.diff(edges)).sum(axis=1), 1.0)
    assert dens[1].tolist() == [0.0, 4.0, 0.0, 0.0]  # all of slice 1 in the bin [0.25, 0.5)


def test_plane_crcs_catch_a_changed_plane():
    a = np.random.default_rng(1).random((4, 3, 3))
    b = a.copy()
    b[2, 1, 1] += 1e-15
    ca, cb = stream.plane_crcs([a]), stream.plane_crcs([b])
    assert (ca[0] != cb[0]).tolist() == [False, False, True, False]
    assert stream.digest(ca) != stream.digest(cb)


def test_bp5_files_carry_every_step_through_the_chain(tmp_path):
    # BP5 is the file engine: the writer finishes first, then each consumer reads the file.
    (tmp_path / "s.json").write_text(json.dumps({"L": 12, "steps": 30, "plotgap": 10, "engine": "BP5"}))
    gs, pdfs = str(tmp_path / "gs.bp"), str(tmp_path / "pdf.bp")
    bp5 = {"engine": "BP5"}
    steps = [
        [*PY, *part("simulation", tmp_path / "sim.json", settings=str(tmp_path / "s.json"), stream=gs)],
        [binary("mpiexec"), "-n", "2", *PY, *part("pdf", tmp_path / "pdf.json", **bp5, stream=gs, out_engine="BP5",
                                                  out_stream=pdfs, bins=8)],
        [*PY, *part("gplot", tmp_path / "gplot.json", **bp5, stream=gs, frames=str(tmp_path / "fr"))],
        [*PY, *part("pdfplot", tmp_path / "pdfplot.json", **bp5, stream=pdfs, frames=str(tmp_path / "fr"))],
    ]
    for argv in steps:
        res = run_group(argv, 120)
        assert res.returncode == 0, f"{argv[-3]}: {res.stderr}"
    res = {n: json.loads((tmp_path / f"{n}.json").read_text())["steps"] for n in ("sim", "pdf", "gplot", "pdfplot")}
    written = [(r["step"], r["digest"]) for r in res["sim"]]
    assert [s for s, _ in written] == [10, 20, 30]
    assert [(r["step"], r["digest"]) for r in res["pdf"]] == written
    assert [(r["step"], r["digest"]) for r in res["gplot"]] == written
    assert [r["digest"] for r in res["pdfplot"]] == [r["out_digest"] for r in res["pdf"]]


def test_staging_off_still_times_every_output_interval(tmp_path):
    # The benchmark's baseline: engine none writes nothing but reports the same intervals.
    (tmp_path / "s.json").write_text(json.dumps({"L": 12, "steps": 30, "plotgap": 10, "engine": "none"}))
    res = subprocess.run([*PY, *part("simulation", tmp_path / "sim.json", settings=str(tmp_path / "s.json"))],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    rows = json.loads((tmp_path / "sim.json").read_text())["steps"]
    assert [r["step"] for r in rows] == [10, 20, 30]
    assert all(r["interval_s"] >= r["compute_s"] > 0 and r["bytes"] == 0 and r["digest"] is None for r in rows)


def test_reading_a_bp5_file_leaves_nothing_in_tmp(tmp_path):
    # ADIOS2's BP5 reader writes /tmp/<name>_<pid hex>_profiling.json at every Close.
    from geofed.apps.grayscott import outputs
    path = tmp_path / f"geofed-test-{os.getpid()}.bp"
    w = stream.Writer(str(path), "BP5", 1, {"U": (3, 2)}, 5.0)
    w.write(10, {"U": np.ones((3, 2))})
    w.close()
    profile = Path(f"/tmp/{path.name}_{os.getpid():x}_profiling.json")
    assert outputs.step_digests(path, ["U"]) == {10: stream.digest(stream.plane_crcs([np.ones((3, 2))]))}
    assert not profile.exists()
    assert [v["name"] for v in outputs.listing(path)] == ["U", "plane_crc", "step"]
    assert not profile.exists()
