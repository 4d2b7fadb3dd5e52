"""MDFS across testbed nodes and sites: identical results for 1, 2 and 4 ranks and for
1 and 2 sites, data staged from the storage site across the link."""

import re

import numpy as np
import pytest

from conftest import needs_root
from geofed import federation
from geofed.apps.mdfs import core, data, dist
from geofed.launch.placement import parse

pytestmark = [pytest.mark.root, pytest.mark.slow, needs_root]


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    from geofed.testbed import core as tb
    tmp = tmp_path_factory.mktemp("mdfsfed")
    text = federation.load("icm-task").path.read_text()
    path = tmp / "fed.toml"
    path.write_text(re.sub(r'(?m)^name\s*=.*$', 'name = "gftest-mdfs"', text, count=1))
    f = federation.load(path)
    try:
        tb.up(f)
        yield f
    finally:
        tb.down(f.name)


def test_same_result_for_any_placement_and_split(fed, tmp_path):
    ds = data.madelon_like(n=600, p=80, seed=4)
    npz = data.save_npz(tmp_path / "d.npz", ds.x, ds.y)
    params = core.Params(dimensions=2, discretizations=3, range_=0.5)
    local = core.analyse(ds.x, ds.y, params)
    for placement, split in [("G0W1", "speed"), ("G0W2", "even"), ("G1W1", "speed"), ("G2W2", "calibrate")]:
        res = dist.run_on_placement(fed, parse(placement, fed), npz, params, split, timeout=240)
        for key in ("max_ig", "contrast_max_ig", "best_tuple", "best_discretization", "p_value"):
            assert np.array_equal(local[key], res[key]), (placement, key)
        assert list(res["relevant"]) == list(local["relevant"])
        nodes = [p["node"] for p in res["ranks"]]
        assert len(nodes) == int(placement[1]) + int(placement[3])
        # data came from the storage site (W); G ranks got it across the link
        for p in res["ranks"]:
            assert p["staging"]["crossed_link"] == (p["site"] != fed.storage)
            assert p["staging"]["bytes"] == npz.stat().st_size
        assert sum(p["tuples"] for p in res["ranks"]) == local["tuples_scored"]
