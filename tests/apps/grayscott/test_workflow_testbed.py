"""`geofed workflow grayscott` on a real testbed: a copy of icm-task (9 ms link) under its own name."""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import GEOFED, needs_root, run_geofed
from geofed import demo, federation, records, report, workloads
from geofed.testbed import core, host
from geofed.testbed.plan import make_plan

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]
NAME = f"gftest-gs-{os.getpid()}"


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    text = federation.load("icm-task").path.read_text().replace('name = "icm-task"', f'name = "{NAME}"')
    path = tmp_path_factory.mktemp("gs") / "fed.toml"
    path.write_text(text)
    f = federation.load(path)
    try:
        core.up(f)
        yield f
    finally:
        core.down(NAME)


def test_every_step_crosses_the_9ms_link_intact(fed, tmp_path):
    res = run_geofed("workflow", "grayscott", "-f", str(fed.path), "--L", "24", "--steps", "60", "--plotgap", "10",
                     "--out", str(tmp_path), "--timeout", "300", "--checkpoint")
    assert res.returncode == 0, res.stderr
    rec = json.loads(next(tmp_path.glob("workflow.grayscott-*.json")).read_text())
    d = rec["data"]
    assert d["link"]["rtt_ms"] > 8.5 and d["verify"]["ok"]
    assert [r["step"] for r in d["steps"]] == [10, 20, 30, 40, 50, 60]
    for r in d["steps"]:
        assert {c["digest"] for c in r["consumers"].values()} == {r["digest"]}
        # Nothing arrives before it could have crossed the link once.
        assert all(c["delivery_s"] * 1e3 >= d["link"]["rtt_ms"] / 2 for c in r["consumers"].values())
    x = d["transfer"]
    assert x["link_bytes"] >= x["payload_bytes"] == 2 * 6 * 2 * 24 ** 3 * 8
    assert {p["name"]: p["nodes"][0][0] for p in d["parts"]} == {"simulation": "G", "pdf": "W", "gplot": "W", "pdfplot": "W"}
    page = (tmp_path / "report.html").read_text()
    assert page.count("<img") >= 2
    # The BP5 files the run left, read back with adios2's Python API: pdf.bp holds what
    # the PDF plotter received across the link, gs.bp what the simulation staged.
    from pathlib import Path
    from geofed.apps.grayscott import outputs
    run_dir = Path(d["run_dir"])
    assert outputs.step_digests(run_dir / "pdf.bp", ["U/pdf", "V/pdf"]) == {r["step"]: r["digest"] for r in d["pdf_stream"]}
    assert outputs.step_digests(run_dir / "gs.bp", ["U", "V"]) == {r["step"]: r["digest"] for r in d["steps"]}
    listed = {x["name"] for x in d["verify"]["consumers"]["pdf.bp"]["listing"]}
    assert {"U/pdf", "V/pdf", "U/bins", "V/bins", "step"} <= listed
    assert "pdf.bp (BP5" in page and "gs.bp (BP5" in page


def test_bench_compares_staging_on_and_off_and_with_plain_tcp_and_stays_below_the_link_rate(fed, tmp_path):
    res = run_geofed("bench", "grayscott", "-f", str(fed.path), "--sizes", "16:40", "--repeat", "2",
                     "--out", str(tmp_path), "--timeout", "300")
    assert res.returncode == 0, res.stderr
    assert "overhead" in res.stdout and "L = 16, 2 rounds, medians" in res.stdout
    data = json.loads(next(tmp_path.glob("bench.grayscott-*.json")).read_text())["data"]
    cases = data["cases"]
    assert [c["round"] for c in cases] == [1, 2]
    case = cases[0]
    # The ceiling moved the same steps between the same nodes: one rate per output step,
    # none faster than the link, none arriving before the link's one-way delay.
    tcp = case["ceiling"]
    assert [s["step"] for s in tcp["steps"]] == [0, 1, 2, 3]
    assert all(s["delivery_s"] * 1e3 >= data["link"]["rtt_ms"] / 2 for s in tcp["steps"])
    assert 0 < tcp["median_mbps"] <= case["on"]["transfer"]["configured_mbps"]
    assert case["of_ceiling"] == case["on"]["transfer"]["median_link_mbps"] / tcp["median_mbps"]
    assert len(case["off"]["intervals_s"]) == len(case["on"]["intervals_s"]) == 4
    assert case["off"]["per_step_ms"] > 0 and case["on"]["intact"]
    # Gathering and staging take time the stencil does not: the direct cost is positive.
    assert case["on"]["staging_ms"] > 0 and case["staging_overhead"] > 0
    x = case["on"]["transfer"]
    rates = [v for v in x["median_mbps"].values() if v is not None] + [x["median_link_mbps"] or 0]
    assert rates and max(rates) <= x["configured_mbps"]
    assert x["link_bytes"] >= x["payload_bytes"] > 0


def test_the_demo_step_records_a_workflow_with_frames(fed, tmp_path):
    # The step `geofed demo` runs on icm-task, here on this module's copy of it.
    step = next(s for s in demo.STEPS if s.workload == "grayscott")
    w = workloads.get(step.workload)
    rec = w.run(workloads.Context(fed, out=tmp_path), w.params_from_dict(step.params))
    assert w.sanity(rec).ok
    records.save(rec, tmp_path)
    assert "every step reached every consumer intact" in w.table(rec)
    report.render(records.load_dir(tmp_path), tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "Gray-Scott across sites" in page and page.count("<img") >= 2


def test_a_dead_consumer_stops_the_workflow_with_its_name(fed, tmp_path):
    # A slow pdf analysis keeps the run going long enough to kill it in the middle.
    proc = subprocess.Popen([GEOFED, "workflow", "grayscott", "-f", str(fed.path), "--L", "16", "--steps", "400",
                             "--plotgap", "10", "--slow-pdf", "0.5", "--out", str(tmp_path), "--timeout", "300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        w1 = make_plan(fed).node("W1").netns
        deadline, victim = time.monotonic() + 120, None
        while victim is None and time.monotonic() < deadline and proc.poll() is None:
            for pid in host.netns_pids(w1):
                try:
                    cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                except OSError:
                    continue
                if b"grayscott-pdf" in cmd and b"geofed.workloads" in cmd and not cmd[0].endswith(b"hydra_pmi_proxy"):
                    victim = pid
            if victim is None:
                time.sleep(0.2)  # polling for the process to appear, bounded by the deadline
        assert victim is not None, "the pdf analysis never started"
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1
    assert "the pdf analysis on W1 exited" in err and "workflow was stopped" in err
    # No rank of any part survives (Hydra's proxy shells can take ~10 s more to exit).
    deadline = time.monotonic() + 10
    while (left := _ours(fed)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [(p, _cmdline(p), _state(p)) for p in left] == []


def _ours(fed):
    return [p for n in ("W1", "W2", "W3", "G1", "G2")
            for p in host.pids_with_env(host.netns_pids(make_plan(fed).node(n).netns), "GEOFED_TESTBED", NAME)
            if "geofed.workloads grayscott-" in _cmdline(p)]


def _cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "(gone)"


def _state(pid):
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[1].split()[0]
    except OSError:
        return "(gone)"
