"""The simulation against a straightforward NumPy reference, on 1 and 4 real MPI ranks."""

import json
import subprocess
import sys

import numpy as np
import pytest

from geofed.native import binary


def reference(L, steps, Du, Dv, F, k, dt):
    """Gray-Scott on the whole periodic cube with np.roll: no blocks, no ghosts, no MPI."""
    u, v = np.ones((L, L, L)), np.zeros((L, L, L))
    c = slice(L // 2 - 6, L // 2 + 6)
    u[c, c, c], v[c, c, c] = 0.25, 0.33

    def lap(f):
        total = np.roll(f, 1, 0) + np.roll(f, -1, 0)
        total = total + np.roll(f, 1, 1) + np.roll(f, -1, 1)
        total = total + np.roll(f, 1, 2) + np.roll(f, -1, 2)
        return (total - 6.0 * f) / 6.0

    for _ in range(steps):
        uvv = u * v * v
        du = Du * lap(u) - uvv + F * (1.0 - u)
        dv = Dv * lap(v) + uvv - (F + k) * v
        u, v = u + du * dt, v + dv * dt
    return u, v


def run_sim(tmp_path, ranks, settings, *extra):
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    final = tmp_path / f"final-{ranks}.npz"
    cmd = [binary("mpiexec"), "-n", str(ranks), sys.executable, "-m", "geofed.apps.grayscott.simulation",
           str(path), "--final", str(final), *extra]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return res, final


@pytest.mark.parametrize("ranks", [1, 4])
def test_matches_numpy_reference_without_noise(tmp_path, ranks):
    # 4 ranks form a 2x2x1 grid; L = 21 splits unevenly (11 + 10), which the
    # reference must not notice either.
    s = {"L": 21, "steps": 60, "plotgap": 10, "noise": 0.0, "engine": "none",
         "Du": 0.2, "Dv": 0.1, "F": 0.02, "k": 0.048, "dt": 1.0}
    res, final = run_sim(tmp_path, ranks, s)
    assert res.returncode == 0, res.stderr
    got = np.load(final)
    u, v = reference(21, 60, 0.2, 0.1, 0.02, 0.048, 1.0)
    assert np.abs(v - 0.0).max() > 1e-3  # the reaction has spread: a real comparison
    assert np.abs(got["U"] - u).max() <= 1e-12
    assert np.abs(got["V"] - v).max() <= 1e-12


def test_noise_is_reproducible_with_a_seed_and_changes_with_it(tmp_path):
    s = {"L": 16, "steps": 20, "plotgap": 10, "noise": 0.01, "engine": "none", "seed": 7}
    a = np.load(run_sim(tmp_path / "a", 2, s)[1])
    b = np.load(run_sim(tmp_path / "b", 2, s)[1])
    c = np.load(run_sim(tmp_path / "c", 2, dict(s, seed=8))[1])
    assert np.array_equal(a["U"], b["U"])
    assert not np.array_equal(a["U"], c["U"])


def test_too_many_ranks_for_L_is_an_error(tmp_path):
    res, _ = run_sim(tmp_path, 4, {"L": 1, "steps": 1, "engine": "none"})
    assert res.returncode == 2
    assert "too small" in res.stderr
