import pytest

from geofed import federation
from geofed.errors import UserError
from geofed.launch.placement import parse


@pytest.fixture(scope="module")
def icm():
    return federation.load("icm-task")


def test_seed_000_codes(icm):
    p = parse("G2W3", icm)
    assert p.groups == (("G", 2), ("W", 3))
    assert [n.name for n in p.nodes(icm)] == ["G1", "G2", "W1", "W2", "W3"]
    assert p.node_count == 5
    assert p.sites() == ["G", "W"]


def test_zero_nodes_at_a_site_is_allowed(icm):
    p = parse("G0W4", icm)
    assert [n.name for n in p.nodes(icm)] == ["W1", "W2", "W3", "W4"]
    assert p.sites() == ["W"]


@pytest.mark.parametrize("code,message", [
    ("", "expected site letters"),
    ("G2W", "expected site letters"),
    ("g2w1", "expected site letters"),
    ("G2 W1", "expected site letters"),
    ("X1", "unknown site letter X (federation icm-task has W, G)"),
    ("G3", "site G has 2 nodes, 3 asked"),
    ("G1G1", "site G is named twice"),
    ("G0W0", "asks for no node"),
])
def test_bad_placements(icm, code, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(code, icm)
