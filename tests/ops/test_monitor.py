"""Level-shift detection on synthetic series, and `geofed monitor show` on a store."""


import numpy as np
import pytest

from conftest import run_geofed
from geofed import records
from geofed.ops import monitor
from geofed.ops.shifts import level_shifts


def noisy(n, level, sigma, seed):
    return list(level + np.random.default_rng(seed).normal(0, sigma, n))


@pytest.mark.parametrize("seed", range(5))
def test_noise_alone_is_no_event(seed):
    x = noisy(400, 480.0, 8.0, seed)
    assert level_shifts(list(range(400)), x) == []


def test_heavy_tailed_latency_noise_is_no_event():
    x = list(4500 + np.random.default_rng(7).lognormal(0, 1, 500) * 20)
    assert level_shifts(list(range(500)), x) == []


@pytest.mark.parametrize("seed", range(5))
def test_a_step_is_found_with_its_start_and_size(seed):
    # seed 001: a licence limited the range extender's buffers, bandwidth fell and stayed down
    x = noisy(300, 480.0, 8.0, seed)
    x[180:] = [v - 200 for v in x[180:]]
    t = [1000.0 + 60 * i for i in range(300)]
    (e,) = level_shifts(t, x)
    assert e["index"] == 180 and e["start"] == t[180]
    assert e["change"] == pytest.approx(-200, abs=15) and e["relative"] == pytest.approx(-200 / 480, abs=0.04)


def test_a_spike_shorter_than_the_run_is_not_a_shift_but_two_steps_are_two():
    x = noisy(300, 100.0, 1.0, 3)
    x[50:53] = [400.0] * 3
    x[120:200] = [v + 30 for v in x[120:200]]
    events = level_shifts(list(range(300)), x)
    assert [(e["index"], e["change"] > 0) for e in events] == [(120, True), (200, False)]


def test_monitor_show_reports_the_event_and_writes_a_record(tmp_path):
    db_path = tmp_path / "m.sqlite"
    db = monitor.open_db(db_path)
    bw = noisy(60, 470.0, 3.0, 1)
    bw[30:] = [v - 150 for v in bw[30:]]
    lat = noisy(60, 4510.0, 5.0, 2)
    with db:
        db.executemany("INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                       [(1.7e9 + 60 * i, "icm-task", "W1", "G1", "inter-site", lat[i], lat[i] - 10, bw[i],
                         4502.0, 468.6, None) for i in range(60)]
                       + [(1.7e9 + 3600, "icm-task", "W1", "G1", None, None, None, None, None, None, "hang")])
    db.close()
    res = run_geofed("monitor", "show", "--db", str(db_path), "--out", str(tmp_path / "rec"))
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stdout.splitlines() if l.startswith("W1-G1")]
    assert "none" in lines[0] and "60      1" in lines[0]  # latency steady; the failed round counted
    assert "-> " in lines[1] and "%" in lines[1]
    (rec,) = records.load_dir(tmp_path / "rec")
    (s,) = rec.data.series
    assert [e["index"] for e in s["events"]["bw_MBps"]] == [30] and s["events"]["latency_us"] == []


def test_monitor_needs_a_bound_and_good_pairs(tmp_path):
    res = run_geofed("monitor", "run", "-f", "icm-task", "--pairs", "W1-G1", "--db", str(tmp_path / "x.sqlite"))
    assert res.returncode == 2 and "give --count N or --duration" in res.stderr
    res = run_geofed("monitor", "run", "-f", "icm-task", "--pairs", "W1-X9", "--count", "1",
                     "--db", str(tmp_path / "x.sqlite"))
    assert res.returncode == 2 and "--pairs 'W1-X9'" in res.stderr
    assert not (tmp_path / "x.sqlite").exists()
    res = run_geofed("monitor", "show", "--db", str(tmp_path / "none.sqlite"))
    assert res.returncode == 2 and "no such monitoring store" in res.stderr
