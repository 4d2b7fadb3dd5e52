"""`geofed obstacle`: bad input ends with one line and exit status 2, before anything starts."""

import pytest

from conftest import run_geofed


@pytest.mark.parametrize("args,words", [
    (["--n", "3", "-p", "G2W2"], ["--n 3", "too small for 4 peers"]),
    (["--n", "16", "-p", "G1W1", "--delta", "0.01"], ["--delta", "outside"]),
    (["--n", "16", "-p", "G1W1", "--secret-file", "/nonexistent/secret"], ["secret missing"]),
    (["--n", "16", "-p", "X2"], ["placement", "X"]),
    (["--n", "16", "-p", "G1W1", "--tol", "0"], ["--tol"]),
])
def test_bad_input_is_one_line_and_exit_2(args, words, tmp_path):
    r = run_geofed("obstacle", *args, "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("geofed: error:", "geofed obstacle: error:")), r.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not (tmp_path / "out").exists()


def test_empty_secret_file_is_missing(tmp_path):
    empty = tmp_path / "secret"
    empty.write_text("\n")
    r = run_geofed("obstacle", "--n", "16", "-p", "G1W1", "--secret-file", str(empty))
    assert r.returncode == 2 and "secret missing" in r.stderr
