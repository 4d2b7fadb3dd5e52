"""The simulation against a straightforward NumPy reference, on 1 and 4 real MPI ranks."""

import json
import sys

import numpy as np
import pytest

from tests.conftest import run_ranks


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


def run_sim(tmp_path, ranks, settings, **params):
    """The simulation's rank program; its final U and V (None when it failed)."""
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    result = tmp_path / f"result-{ranks}.json"
    res = run_ranks(ranks, [sys.executable, "-m", "geofed.workloads", "grayscott-simulation",
                            json.dumps({"settings": str(path), "final": True, **params}), str(result)], 300)
    final = json.loads(result.read_text())["final"] if result.exists() else None
    return res, final and {k: np.array(v) for k, v in final.items()}


@pytest.mark.parametrize("ranks", [1, 4])
def test_matches_numpy_reference_without_noise(tmp_path, ranks):
    # 4 ranks form a 2x2x1 grid; L = 21 splits unevenly (11 + 10), which the
    # reference must not notice either.
    s = {"L": 21, "steps": 60, "plotgap": 10, "noise": 0.0, "engine": "none",
         "Du": 0.2, "Dv": 0.1, "F": 0.02, "k": 0.048, "dt": 1.0}
    res, got = run_sim(tmp_path, ranks, s)
    assert res.returncode == 0, res.stderr
    u, v = reference(21, 60, 0.2, 0.1, 0.02, 0.048, 1.0)
    assert np.abs(v - 0.0).max() > 1e-3  # the reaction has spread: a real comparison
    assert np.abs(got["U"] - u).max() <= 1e-12
    assert np.abs(got["V"] - v).max() <= 1e-12


def test_noise_is_reproducible_with_a_seed_and_changes_with_it(tmp_path):
    s = {"L": 16, "steps": 20, "plotgap": 10, "noise": 0.01, "engine": "none", "seed": 7}
    a = run_sim(tmp_path / "a", 2, s)[1]
    b = run_sim(tmp_path / "b", 2, s)[1]
    c = run_sim(tmp_path / "c", 2, dict(s, seed=8))[1]
    assert np.array_equal(a["U"], b["U"])
    assert not np.array_equal(a["U"], c["U"])


def test_too_many_ranks_for_L_is_an_error(tmp_path):
    res, _ = run_sim(tmp_path, 4, {"L": 1, "steps": 1, "engine": "none"})
    assert res.returncode == 2
    assert "too small" in res.stderr


@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_native_kernel_equals_numpy_bit_for_bit(noise):
    from geofed.apps.grayscott import model, settings
    rng = np.random.default_rng(3)
    shape = (9, 6, 11)  # an uneven block, ghosts included
    u0, v0 = rng.uniform(0, 1, shape), rng.uniform(0, 0.5, shape)
    s = settings.from_dict({"L": 16, "noise": noise, "Du": 0.2, "Dv": 0.1, "F": 0.02, "k": 0.048, "dt": 1.0})
    out = {}
    for kernel, threads in (("numpy", 1), ("native", 1), ("native", 3)):
        stepper = model.Stepper(s, tuple(n - 2 for n in shape), np.random.default_rng(11) if noise else None,
                                kernel, threads)
        u, v = u0.copy(), v0.copy()
        u2, v2 = np.zeros(shape), np.zeros(shape)
        for _ in range(5):  # ghosts stay as drawn: the kernels must agree on any input
            stepper.step(u, v, u2, v2)
            u[1:-1, 1:-1, 1:-1], v[1:-1, 1:-1, 1:-1] = u2[1:-1, 1:-1, 1:-1], v2[1:-1, 1:-1, 1:-1]
        out[kernel, threads] = u, v
    ref_u, ref_v = out["numpy", 1]
    assert not np.array_equal(ref_u, u0)
    for key in (("native", 1), ("native", 3)):
        assert np.array_equal(out[key][0], ref_u) and np.array_equal(out[key][1], ref_v), key


def test_kernels_agree_on_real_ranks_with_noise(tmp_path):
    s = {"L": 16, "steps": 20, "plotgap": 10, "noise": 0.01, "engine": "none", "seed": 7}
    native = run_sim(tmp_path / "native", 2, s, threads=2)[1]
    numpy_ = run_sim(tmp_path / "numpy", 2, s, kernel="numpy")[1]
    assert np.array_equal(native["U"], numpy_["U"]) and np.array_equal(native["V"], numpy_["V"])


def test_a_restart_from_a_checkpoint_equals_the_uninterrupted_run(tmp_path):
    s = {"L": 21, "steps": 60, "plotgap": 10, "noise": 0.0, "engine": "none"}
    res, whole = run_sim(tmp_path / "whole", 2, s)
    assert res.returncode == 0, res.stderr
    ckpt = tmp_path / "gs.bp"
    res, _ = run_sim(tmp_path / "first", 2, dict(s, steps=30), checkpoint=str(ckpt))
    assert res.returncode == 0, res.stderr
    # Restarted on another rank count: the checkpoint holds the global fields.
    res, resumed = run_sim(tmp_path / "resumed", 4, s, restart=str(ckpt))
    assert res.returncode == 0, res.stderr
    a, b = whole, resumed
    assert np.array_equal(a["U"], b["U"]) and np.array_equal(a["V"], b["V"])
    from geofed.apps.grayscott import outputs
    assert sorted(outputs.step_digests(ckpt, ["U", "V"])) == [10, 20, 30]
    names = {x["name"]: x for x in outputs.listing(ckpt)}
    assert names["U"]["shape"].replace(" ", "") == "21,21,21" and names["U"]["steps"] == 3


@pytest.mark.parametrize("bad,message", [("missing.bp", "not a readable checkpoint"), ("wrong-L", "the settings' L is 16")])
def test_a_bad_restart_is_one_line_and_exit_2(tmp_path, bad, message):
    path = tmp_path / bad
    if bad == "wrong-L":
        path = tmp_path / "gs.bp"
        assert run_sim(tmp_path / "w", 1, {"L": 12, "steps": 10, "plotgap": 10, "engine": "none"},
                       checkpoint=str(path))[0].returncode == 0
    res, _ = run_sim(tmp_path / "r", 1, {"L": 16, "steps": 20, "plotgap": 10, "engine": "none"}, restart=str(path))
    assert res.returncode == 2
    assert message in res.stderr and "Traceback" not in res.stderr
