"""`geofed bench apps` on a small federation of its own: a classic C stencil geofed did not
write, profiled at one site, run, predicted and rehearsed across the link."""

import os

import pytest

from conftest import needs_root, run_geofed, two_site_federation
from geofed import records

RTT_MS = 9.0
SWEEPS, N = 150, 900  # bench apps' jacobi2d


@needs_root
@pytest.mark.root
def test_a_stencil_profiled_at_one_site_is_run_predicted_and_rehearsed_across_it(tmp_path):
    fed = tmp_path / "fed.toml"
    fed.write_text(two_site_federation(f"gftest-apps-{os.getpid() % 100000}", rtt_ms=RTT_MS))
    res = run_geofed("bench", "apps", "--federations", str(fed), "--programs", "jacobi2d", "--nodes", "2",
                     "--placements", "2", "--repeat", "1", "--profiles", str(tmp_path / "profiles"),
                     "--out", str(tmp_path / "out"), timeout=600)
    assert res.returncode == 0, res.stderr
    (path,) = (tmp_path / "out").glob("bench.apps-*.json")
    d = records.read(path).data
    assert [(r["program"], r["profiled_at"], r["placement"]) for r in d.rows] == \
        [("jacobi2d", "A2", "A1B1"), ("jacobi2d", "A2", "B1A1")]
    prof = records.read(d.rows[0]["profile"]).data
    # the band's two boundary rows go to each neighbour every sweep, and once in ten sweeps the ranks agree
    for r, rank in enumerate(prof.ranks):
        kinds = {(p["kind"], p["bytes"], p["count"]) for p in rank["patterns"]}
        assert ("sendrecv", N * 8, SWEEPS) in kinds and ("allreduce", 8, SWEEPS // 10) in kinds, kinds
    # the link emulator's CPU across, measured once for the federation: every message takes some
    forwarding = d.rows[0]["forwarding"]
    assert forwarding["us_per_message"] > 0 and forwarding["ns_per_byte"] >= 0
    assert forwarding["host_cores"] == os.cpu_count() and all(r["forwarding"] == forwarding for r in d.rows)
    for row in d.rows:
        # every sweep waits for a row from across the link: at least a one-way trip each
        assert row["measured_s"] >= row["profile_s"] + SWEEPS * RTT_MS / 2e3 * 0.9
        assert row["parts"]["link_comm"] >= SWEEPS * RTT_MS / 2e3 * 0.9
        assert row["rehearsal_s"] >= SWEEPS * RTT_MS / 2e3 * 0.9
        assert row["rehearsal_runs_s"] == [row["rehearsal_s"]]  # one round: one rehearsal, after its run
        assert row["interval_s"][0] <= row["predicted_s"] <= row["interval_s"][1]
    assert "median |error|" in res.stdout and "jacobi2d" in res.stdout

    # predicted again from the kept profiles (a model change's check): nothing runs, the same rows
    res = run_geofed("bench", "apps", "--again", str(path), "--out", str(tmp_path / "again"))
    assert res.returncode == 0, res.stderr
    (again,) = (tmp_path / "again").glob("bench.apps-*.json")
    rows = records.read(again).data.rows
    assert [(r["measured_s"], r["rehearsal_s"]) for r in rows] == [(r["measured_s"], r["rehearsal_s"]) for r in d.rows]
    assert [r["predicted_s"] for r in rows] == pytest.approx([r["predicted_s"] for r in d.rows])
