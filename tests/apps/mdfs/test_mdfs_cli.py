"""CSV input, its errors, and `geofed mdfs run` as a user runs it."""

import json

import numpy as np
import pytest

from conftest import run_geofed
from geofed.apps.mdfs import data
from geofed.errors import UserError


def write_csv(path, x, y, header=True, decision_first=False, sep=","):
    names = [f"g{j}" for j in range(x.shape[1])]
    with open(path, "w") as f:
        if header:
            f.write(sep.join((["class"] + names) if decision_first else (names + ["class"])) + "\n")
        for row, c in zip(x, y):
            cells = [repr(float(v)) for v in row]
            f.write(sep.join(([c] + cells) if decision_first else (cells + [c])) + "\n")


@pytest.fixture
def small():
    ds = data.madelon_like(n=300, p=12, informative=3, redundant=2, clusters_per_class=2, seed=1)
    return ds.x, ds.y


def test_header_decision_by_name_and_labels(tmp_path, small):
    x, y = small
    write_csv(tmp_path / "d.csv", x, ["case" if c else "control" for c in y], decision_first=True)
    ds = data.load_csv(tmp_path / "d.csv", decision="class")
    assert ds.names == [f"g{j}" for j in range(12)] and ds.classes == ["case", "control"]
    assert np.array_equal(ds.x, x) and np.array_equal(ds.y, 1 - y)  # "case" sorts first


def test_no_header_last_column_and_decision_file(tmp_path, small):
    x, y = small
    write_csv(tmp_path / "d.csv", x, [str(c) for c in y], header=False, sep="\t")
    ds = data.load_csv(tmp_path / "d.csv")
    assert np.array_equal(ds.x, x) and np.array_equal(ds.y, y)
    np.savetxt(tmp_path / "x.csv", x, delimiter=",")
    (tmp_path / "y.txt").write_text("\n".join(str(2 * int(c) - 1) for c in y) + "\n")  # -1/1 labels
    ds = data.load_csv(tmp_path / "x.csv", decision_file=tmp_path / "y.txt")
    assert np.array_equal(ds.y, y) and ds.x.shape == (300, 12)


@pytest.mark.parametrize("edit,message", [
    (lambda rows: rows.__setitem__(3, rows[3].replace(rows[3].split(",")[2], "abc", 1)), "d.csv:4, column V3: not a number: 'abc'"),
    (lambda rows: rows.__setitem__(5, rows[5].replace(rows[5].split(",")[0], "NA", 1)), "d.csv:6, column V1: missing value ('NA')"),
    (lambda rows: rows.__setitem__(slice(None), [r.rsplit(",", 1)[0] + ",1" for r in rows]), "single class"),
])
def test_bad_cells_and_single_class_name_where(tmp_path, small, edit, message):
    x, y = small
    write_csv(tmp_path / "d.csv", x, [str(c) for c in y], header=False)
    rows = (tmp_path / "d.csv").read_text().splitlines()
    edit(rows)
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        data.load_csv(tmp_path / "d.csv")


def test_decision_length_mismatch_and_unknown_column(tmp_path, small):
    x, y = small
    np.savetxt(tmp_path / "x.csv", x, delimiter=",")
    (tmp_path / "y.txt").write_text("\n".join(str(c) for c in y[:-3]) + "\n")
    with pytest.raises(UserError, match="297 decisions for 300 objects"):
        data.load_csv(tmp_path / "x.csv", decision_file=tmp_path / "y.txt")
    with pytest.raises(UserError, match="--decision nope: no such column"):
        data.load_csv(tmp_path / "x.csv", decision="nope")


def test_cli_run_writes_results_and_record_and_bad_input_exits_2(tmp_path, small):
    x, y = small
    write_csv(tmp_path / "d.csv", x, [str(c) for c in y])
    out = tmp_path / "out"
    res = run_geofed("mdfs", "run", str(tmp_path / "d.csv"), "--decision", "class", "--dim", "2", "-D", "3",
                     "--range", "0.5", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "relevant of 12 variables" in res.stdout
    rec = json.loads(next(out.glob("mdfs.run-*.json")).read_text())
    assert rec["kind"] == "mdfs.run" and len(rec["data"]["max_ig"]) == 12
    rows = (out / "mdfs-ig.csv").read_text().splitlines()
    assert rows[0].startswith("variable,index,max_ig") and len(rows) == 13
    # the relevant ones printed are those the CSV marks
    marked = [r.split(",")[0] for r in rows[1:] if r.split(",")[6] == "1"]
    assert sorted(marked) == sorted(rec["data"]["relevant"])
    rep = run_geofed("report", str(out))
    assert rep.returncode == 0 and "MDFS feature selection runs" in (out / "report.html").read_text()
    bad = run_geofed("mdfs", "run", str(tmp_path / "d.csv"), "--dim", "7", "--out", str(out))
    assert bad.returncode == 2 and "--dim: must be 1 to 5, got 7" in bad.stderr
    bad = run_geofed("mdfs", "run", str(tmp_path / "missing.csv"), "--out", str(out))
    assert bad.returncode == 2 and "missing.csv: no such file" in bad.stderr
