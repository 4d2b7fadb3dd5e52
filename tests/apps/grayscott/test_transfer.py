"""Transfer rates from the common clock: publication by the writer to arrival at each consumer."""

import pytest

from geofed.apps.grayscott import bench, workflow


def sim_rows(*published):
    return {"steps": [{"step": 10 * (i + 1), "published": t, "bytes": 4_000_000, "digest": "d"}
                      for i, t in enumerate(published)]}


def consumer(*spans):
    return {"steps": [{"step": 10 * (i + 1), "asked": a, "arrived": b, "bytes": 4_000_000, "digest": "d", "wait_s": 0.0}
                      for i, (a, b) in enumerate(spans)]}


def test_rate_is_bytes_over_publication_to_arrival_when_the_consumer_waited():
    rows = workflow.step_table(sim_rows(100.0), {"pdf": consumer((99.0, 100.020)), "gplot": consumer((99.5, 100.040))})
    pdf, gplot = rows[0]["consumers"]["pdf"], rows[0]["consumers"]["gplot"]
    assert pdf["delivery_s"] == pytest.approx(0.020) and pdf["mbps"] == pytest.approx(1600)
    assert gplot["mbps"] == pytest.approx(800)
    # Both steps' bytes crossed by the time the later consumer had its copy.
    assert rows[0]["link_mbps"] == pytest.approx(1600)


def test_a_consumer_that_asked_late_gets_no_rate():
    rows = workflow.step_table(sim_rows(100.0, 200.0),
                               {"pdf": consumer((99.0, 100.02), (200.5, 200.6)), "gplot": consumer((99.0, 100.03), (199.0, 200.03))})
    late = rows[1]["consumers"]["pdf"]
    assert late["behind"] and late["mbps"] is None and late["delivery_s"] == pytest.approx(0.6)
    assert rows[1]["link_mbps"] is None
    summary = workflow.transfer_summary(rows, 4.0, 8_100_000)
    assert summary["steps_measured"] == {"pdf": 1, "gplot": 2}
    assert summary["behind_steps"] == {"pdf": [20], "gplot": []}
    assert bench.behind_at(summary) == "20"
    assert bench.behind_at(workflow.transfer_summary(rows[:1], 4.0, None)) == "none"
    assert summary["configured_mbps"] == 4000 and summary["payload_bytes"] == 16_000_000
