import pytest

from geofed import federation
from geofed.errors import UserError
from geofed.launch.placement import every_node, on_nodes, parse, read


@pytest.fixture(scope="module")
def icm():
    return federation.load("icm-task")


def names(p, fed):
    return [n.name for n in p.nodes(fed)]


def test_seed_000_codes(icm):
    p = parse("G2W3", icm)
    assert [(g.site, len(g.numbers), g.named) for g in p.groups] == [("G", 2, False), ("W", 3, False)]
    assert names(p, icm) == ["G1", "G2", "W1", "W2", "W3"]
    assert p.node_count == 5
    assert p.sites() == ["G", "W"]
    assert p.code == "G2W3"


def test_zero_nodes_at_a_site_is_allowed(icm):
    p = parse("G0W4", icm)
    assert names(p, icm) == ["W1", "W2", "W3", "W4"]
    assert p.sites() == ["W"]
    assert p.code == "G0W4"


def test_nodes_named_in_brackets_run_in_the_order_written(icm):
    p = parse("W[3,1]G[2]", icm)
    assert names(p, icm) == ["W3", "W1", "G2"]
    assert p.sites() == ["W", "G"] and p.node_count == 3
    assert all(g.named for g in p.groups)
    assert parse("W[2-4]", icm).node_names() == ["W2", "W3", "W4"]
    assert parse("W[1,3-5]", icm).node_names() == ["W1", "W3", "W4", "W5"]


def test_counts_and_named_nodes_mix_site_by_site(icm):
    p = parse("G2W[4]", icm)
    assert names(p, icm) == ["G1", "G2", "W4"]
    assert [g.named for g in p.groups] == [False, True]


@pytest.mark.parametrize("code", ["G2W3", "G0W4", "W[3,1]G[2]", "G2W[4,5]", "W[1,2]", "W[2-4]", "W[5,1-2]"])
def test_the_code_writes_the_placement_back(icm, code):
    p = parse(code, icm)
    assert p.code == code and parse(p.code, icm) == p


def test_naming_the_first_nodes_is_not_a_count(icm):
    # W[1,2] is those two nodes; W2 is any two of W (inside an allocation, the ones Slurm gave).
    assert parse("W[1,2]", icm).node_names() == parse("W2", icm).node_names()
    assert parse("W[1,2]", icm) != parse("W2", icm)


def test_on_nodes_names_exactly_the_nodes_given(icm):
    p = on_nodes([icm.node("W2"), icm.node("W1"), icm.node("G2")])
    assert p.code == "W[2,1]G[2]" and names(p, icm) == ["W2", "W1", "G2"]
    with pytest.raises(ValueError, match="follow each other"):
        on_nodes([icm.node("W1"), icm.node("G1"), icm.node("W2")])


def test_every_node_counts_every_site(icm):
    p = every_node(icm)
    assert p.code == "W5G2" and p.node_count == 7


def test_read_needs_no_federation():
    assert read("A1B[2]").sites() == ["A", "B"]
    assert read("A0B2").sites() == ["B"]


@pytest.mark.parametrize("code,message", [
    ("", "expected site letters"),
    ("G2W", "expected site letters"),
    ("g2w1", "expected site letters"),
    ("G2 W1", "expected site letters"),
    ("W[1", "expected site letters"),
    ("W[]", r"W\[\]: expected node numbers like W\[1,3\] or W\[2-4\]"),
    ("W[1,,2]", "expected node numbers"),
    ("W[a]", "expected node numbers"),
    ("W[4-2]", "range 4-2 runs backwards"),
    ("X1", "unknown site letter X (federation icm-task has W, G)"),
    ("X[1]", "unknown site letter X"),
    ("G3", "site G has 2 nodes, 3 asked"),
    ("G1G1", "site G is named twice"),
    ("G[1]G2", "site G is named twice"),
    ("G0W0", "asks for no node"),
    ("G[3]", "no node G3 in federation icm-task (its nodes: W1-W5, G1-G2)"),
    ("W[0]", "no node W0 in federation icm-task"),
    ("W[1-6]", "no node W6"),
    ("W[2,1,2]", "node W2 is named twice"),
    ("W[1-3,2]", "node W2 is named twice"),
    ("W[7-9]", "no node W7"),
    # Refused without listing a billion nodes first.
    ("W[1-1000000000]", "no node W6"),
    ("G1000000000", "site G has 2 nodes, 1000000000 asked"),
])
def test_bad_placements(icm, code, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        parse(code, icm)
    assert "\n" not in str(e.value) and f"placement {code!r}" in str(e.value)


def test_a_comma_list_of_nodes_is_shown_how_to_write_it(icm):
    with pytest.raises(UserError, match=r"written per site in brackets: W\[1,3\]G\[2\]"):
        parse("W1,W3,G2", icm)
    # Not a list of names: no suggestion.
    with pytest.raises(UserError) as e:
        parse("W1,x", icm)
    assert "brackets:" not in str(e.value)
