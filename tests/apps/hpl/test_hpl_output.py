"""HPL's results parsed from real output (data/hpl-n1000-1x2.out: HPL 2.0 from HPCC
1.5.0, N = 1000, NB = 80, 1 x 2 ranks of MPICH on this machine's kind, 2026-11-24)."""

from pathlib import Path

import pytest

from geofed.apps.hpl import output

REAL = (Path(__file__).parent / "data" / "hpl-n1000-1x2.out").read_text()


def test_real_output():
    (row,) = output.parse(REAL, 1)
    assert (row["variant"], row["n"], row["nb"], row["p"], row["q"]) == ("WR11C2R4", 1000, 80, 1, 2)
    assert row["time_s"] == 0.07 and row["gflops"] == 8.970
    assert row["residual"] == pytest.approx(0.0044729) and row["passed"] is True


def test_a_failed_residual_is_a_failure():
    (row,) = output.parse(REAL.replace("...... PASSED", "...... FAILED"), 1)
    assert row["passed"] is False


def test_fewer_results_than_asked():
    with pytest.raises(output.BadOutput, match="1 of 2 results"):
        output.parse(REAL, 2)


def test_a_result_without_its_check():
    cut = REAL[: REAL.index("||Ax-b||_oo/(eps")]
    with pytest.raises(output.BadOutput, match="no residual check for N = 1000"):
        output.parse(cut, 1)


def test_nothing_printed():
    with pytest.raises(output.BadOutput, match="0 of 1"):
        output.parse("", 1)
