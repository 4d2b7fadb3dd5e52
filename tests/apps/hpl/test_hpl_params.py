"""HPL's input: the grid, N from a share of memory, the file HPL reads, and bad choices."""

import pytest

from geofed.apps.hpl import params as P
from geofed.errors import UserError
from geofed.records.hpl import HplParams, grid, parse_grid


@pytest.mark.parametrize("ranks,expected", [(1, (1, 1)), (2, (1, 2)), (4, (2, 2)), (6, (2, 3)), (7, (1, 7)),
                                        (8, (2, 4)), (12, (3, 4)), (16, (4, 4))])
def test_grid_is_as_square_as_the_ranks_allow(ranks, expected):
    assert grid(ranks) == expected


def test_n_fills_the_share_of_memory_in_whole_blocks():
    n = P.n_for_memory(0.1, 4e9, 80)  # 0.1 of 4 GB: sqrt(5e7) = 7071 -> 7040
    assert n == 7040 and n % 80 == 0
    assert 8 * n * n <= 0.1 * 4e9 < 8 * (n + 80) ** 2


def test_file_has_hpl_dat_layout():
    lines = P.text(HplParams((1000, 2000), 64, 2, 3, "LnM", 0)).splitlines()
    values = [l.split()[0] for l in lines[2:]]
    # N count and list, NB count and list, PMAP, grid count, P, Q, threshold
    assert values[2:11] == ["2", "1000", "1", "64", "0", "1", "2", "3", "16.0"]
    assert lines[22].split()[0] == "5" and "BCAST" in lines[22]  # LnM
    assert lines[24].split()[0] == "0" and "DEPTH" in lines[24]
    assert len(lines) == 31  # HPCC's HPL reads the first 31 lines


@pytest.mark.parametrize("params,nodes,fragment", [
    (HplParams((40,), 80, 1, 2), 2, "--n 40: smaller than the block size NB = 80"),
    (HplParams((1000,), 80, 2, 2), 2, "--grid 2x2: 4 processes, but here has 2 ranks"),
    (HplParams((1000,), 80, 1, 2, "ring"), 2, "--bcast 'ring': unknown variant"),
    (HplParams((1000,), 80, 2, 2, ranks_per_node=2), 1, "--grid 2x2: 4 processes, but here has 2 ranks"),
])
def test_bad_choices_are_named(params, nodes, fragment):
    with pytest.raises(UserError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        params.on(nodes, "here")


def test_the_grid_is_chosen_for_the_placement_unless_given():
    assert HplParams((1000,), ranks_per_node=2).on(3, "here") == HplParams((1000,), 80, 2, 3, ranks_per_node=2)
    assert HplParams((1000,), p=1, q=4).on(4, "here").p == 1


@pytest.mark.parametrize("text", ["2", "2x", "0x2", "axb"])
def test_bad_grid_text(text):
    with pytest.raises(UserError, match="--grid"):
        parse_grid(text)


def test_memory_share_out_of_range():
    with pytest.raises(UserError, match="--memory"):
        P.n_for_memory(0.95, 4e9, 80)
