"""geofed's MDFS against the reference library (PyPI mdfs 1.5.2) on the same data."""

from pathlib import Path

import numpy as np
import pytest

from geofed.apps.mdfs import core, data

# the reference frees its buffers in __del__ with a bug of its own (ctypes ArgumentError)
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
mdfs = pytest.importorskip("mdfs")
geofed_mdfs = pytest.importorskip("geofed_mdfs")

MADELON = Path("/work/shared/data/madelon")


@pytest.fixture(scope="module")
def synth():
    ds = data.madelon_like(n=2000, p=500, seed=0)
    return np.asfortranarray(ds.x), ds.y


def close_ig(ref, mine):
    # the reference counts and sums in float32
    return np.all(np.abs(ref - mine) <= 1e-3 + 1e-5 * np.abs(ref))


@pytest.mark.parametrize("var,t,divisions,rng", [(0, 1, 1, 0.9225), (7, 4, 2, 0.5), (123, 2, 15, 0.3), (499, 9, 3, 0.0)])
def test_discretization_bins_are_identical(synth, var, t, divisions, rng):
    x, _ = synth
    ref = mdfs.discretize(x, variable_idx=var, divisions=divisions, discretization_nr=t, seed=17, range_=rng)
    want = np.array(ref.discretized_var, copy=True)  # the reference frees its buffer on collection
    got = geofed_mdfs.discretize(np.ascontiguousarray(x[:, var]), var, divisions, t, 17, rng)
    assert np.array_equal(want, got)


@pytest.mark.parametrize("n_contrast", [30, 500])
def test_contrast_variables_are_identical(synth, n_contrast):
    x, _ = synth
    ref = mdfs.gen_contrast_variables(x[:, :300].copy(order="F"), n_contrast=n_contrast, seed=5)
    src, cdata = geofed_mdfs.contrast_variables(np.ascontiguousarray(x[:, :300]), n_contrast, 5)
    assert np.array_equal(np.array(ref.indices), src)
    assert np.array_equal(np.array(ref.data), cdata)


CASES = [  # (dimensions, discretizations, divisions, variables)
    (1, 1, 1, 500), (1, 3, 2, 500), (2, 1, 1, 500), (2, 3, 2, 500), (2, 3, 1, 500), (3, 1, 1, 50), (3, 3, 2, 50)]


@pytest.mark.slow
@pytest.mark.parametrize("dim,disc,div,p", CASES)
def test_max_ig_p_values_and_relevant_set_match_the_reference(synth, dim, disc, div, p):
    x, y = synth
    x = np.asfortranarray(x[:, :p])
    n_contrast = 30 if (dim, disc) == (1, 1) else None  # the reference's run needs contrasts here
    ref = mdfs.run(x, y.astype(np.intc), dimensions=dim, discretizations=disc, divisions=div, seed=3,
                   n_contrast=n_contrast)
    mine = core.analyse(x, y, core.Params(dimensions=dim, discretizations=disc, divisions=div, seed=3,
                                          n_contrast=n_contrast), threads=2)
    assert close_ig(ref["statistic"], mine["max_ig"])
    assert close_ig(ref["statistic_contrast"], mine["contrast_max_ig"])
    if dim == 1:
        # 1D repeats the reference's float32 arithmetic: with one division, log10 p near
        # p = 1 moves ~7e-3 per 1e-3 of IG, more than float32 rounding allows for 1e-3
        assert np.array_equal(ref["statistic"], mine["max_ig"])
        assert np.array_equal(ref["statistic_contrast"], mine["contrast_max_ig"])
    assert np.array_equal(ref["contrast_indices"], mine["contrast_sources"])
    pr, pm = ref["p_value"], mine["p_value"]
    assert np.array_equal(pr == 0, pm == 0)
    nonzero = pr > 0
    assert np.all(np.abs(np.log10(pr[nonzero]) - np.log10(pm[nonzero])) < 1e-3)
    assert list(ref["relevant_variables"]) == list(mine["relevant"])
    if dim >= 2 and p == 500:
        assert len(mine["relevant"]) >= 15  # the Madelon-like design has 20 relevant variables


def test_real_madelon_reproduces_the_bundled_2d_information_gain():
    x = np.loadtxt(MADELON / "madelon_data.csv", delimiter=",")
    y = np.loadtxt(MADELON / "madelon_decision.csv").astype(np.uint8)
    want = np.loadtxt(MADELON / "madelon_ig2d_reference.csv")
    params = core.Params(dimensions=2, seed=0, range_=0.0, n_contrast=0)
    prep = core.prepare(x, y, params, p_values=False)
    counter = core.Counter(prep, params)
    counter.run(prep.units, threads=2)
    got = counter.results()["ig"]
    assert got.shape == (500,)
    assert np.max(np.abs(got - want)) < 1e-3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chi2_sf_is_scipy_stats_bit_for_bit(dtype):
    from scipy.stats import chi2
    x = np.concatenate([np.random.default_rng(5).random(1000) * 200, [0.0, -1e-17, 5e3]]).astype(dtype)
    for df in (1, 3, 12, 80):
        assert np.array_equal(core.chi2_sf(x, df), chi2.sf(x, df))
