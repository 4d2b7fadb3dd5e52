"""Splitting the work among nodes: proportional shares, and results that do not
depend on the split."""

import numpy as np
import pytest

from geofed.apps.mdfs import core, data

pytest.importorskip("geofed_mdfs")


@pytest.fixture(scope="module")
def small():
    ds = data.madelon_like(n=400, p=60, seed=2)
    return ds.x, ds.y


def test_shares_follow_the_weights_and_cover_every_unit(small):
    x, y = small
    prep = core.prepare(x, y, core.Params(dimensions=2, discretizations=4, range_=0.5))
    shares = core.split(prep.units, [1.0, 0.92, 2.0])
    assert sorted(u for s in shares for u in s) == sorted(prep.units)
    total = sum(u[3] for u in prep.units)
    for s, w in zip(shares, [1.0, 0.92, 2.0]):
        assert abs(sum(u[3] for u in s) / total - w / 3.92) < 0.01


@pytest.mark.parametrize("weights", [[1], [1, 1], [0.92, 1, 1, 0.92], [5, 1, 1]])
def test_results_are_identical_for_any_split_and_thread_count(small, weights):
    x, y = small
    params = core.Params(dimensions=3, discretizations=2, range_=0.5)
    prep = core.prepare(x, y, params)
    whole = core.Counter(prep, params)
    whole.run(prep.units, threads=1)
    want = whole.results()
    parts = []
    for i, share in enumerate(core.split(prep.units, weights)):
        c = core.Counter(prep, params)
        c.run(share, threads=1 + i % 2)
        parts.append(c.results())
    got = core.merge(parts)
    for key in want:
        assert np.array_equal(want[key], got[key]), key


def test_holm_matches_the_step_down_definition():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, then running maximum
    assert np.allclose(core.holm(p), [0.03, 0.06, 0.06, 0.02])
