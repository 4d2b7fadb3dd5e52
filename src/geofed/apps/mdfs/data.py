"""Input data: CSV files (a bioinformatician's matrix of objects x variables with a
decision) and the embedded Madelon-like generator."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from geofed.errors import UserError
from geofed.validate import read_text

MISSING = {"", "na", "nan", "n/a", "null", "none", "?"}


@dataclass
class Dataset:
    x: np.ndarray          # n x p float64
    y: np.ndarray          # n, 0/1
    names: list[str]       # variable names
    classes: list[str]     # the labels behind 0 and 1
    source: str


def _number(cell: str, where: str) -> float:
    c = cell.strip()
    if c.lower() in MISSING:
        raise UserError(f"{where}: missing value{f' ({c!r})' if c else ''}; MDFS needs every value (impute or drop the object)")
    try:
        v = float(c)
    except ValueError:
        raise UserError(f"{where}: not a number: {c!r}") from None
    if not math.isfinite(v):
        raise UserError(f"{where}: not a finite number: {c!r}")
    return v


def _is_number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def _read_rows(path: Path) -> list[list[str]]:
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    text = read_text(path, "data file")
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t ")
    except csv.Error:
        dialect = csv.excel
    rows = [r for r in csv.reader(text.splitlines(), dialect) if any(c.strip() for c in r)]
    if not rows:
        raise UserError(f"{path}: empty file")
    return rows


def _labels(values: list[str], where: str) -> tuple[np.ndarray, list[str]]:
    """0/1 from any two labels (0/1, -1/1, case/control...): numeric order, else sorted."""
    vals = [v.strip() for v in values]
    missing = [i for i, v in enumerate(vals) if v.lower() in MISSING]
    if missing:
        raise UserError(f"{where}: missing decision for object {missing[0] + 1}")
    labels = sorted(set(vals), key=lambda v: (0, float(v), v) if _is_number(v) else (1, 0.0, v))
    if len(labels) == 1:
        raise UserError(f"{where}: the decision has a single class ({labels[0]!r}); MDFS needs two")
    if len(labels) > 2:
        raise UserError(f"{where}: the decision has {len(labels)} classes ({', '.join(labels[:5])}...); MDFS needs two")
    return np.array([labels.index(v) for v in vals], dtype=np.uint8), labels


def load_csv(path: str | Path, decision: str | None = None, decision_file: str | Path | None = None,
             header: bool | None = None) -> Dataset:
    """Objects in rows, variables in columns. The decision is a column (by name or
    0-based index; default: the last) or, with `decision_file`, one label per line.
    `header=None` detects a header row (a first row with a non-numeric cell)."""
    path = Path(path)
    rows = _read_rows(path)
    if header is None:
        header = any(not _is_number(c.strip()) for c in rows[0] if c.strip().lower() not in MISSING)
    names = [c.strip() for c in rows[0]] if header else [f"V{j + 1}" for j in range(len(rows[0]))]
    body = rows[1:] if header else rows
    width = len(names)
    for i, r in enumerate(body):
        if len(r) != width:
            raise UserError(f"{path}:{i + 1 + header}: {len(r)} cells where the first row has {width}")
    if not body:
        raise UserError(f"{path}: no objects (rows) after the header")
    if decision_file is not None:
        if decision is not None:
            raise UserError("--decision and --decision-file: give one of them")
        drows = _read_rows(Path(decision_file))
        dvals = [r[-1] for r in drows]
        if not _is_number(dvals[0].strip()) and len(dvals) == len(body) + 1:
            dvals = dvals[1:]  # a header line
        if len(dvals) != len(body):
            raise UserError(f"{decision_file}: {len(dvals)} decisions for {len(body)} objects in {path}")
        y, classes = _labels(dvals, str(decision_file))
        col = None
    else:
        if decision is None:
            col = width - 1
        elif decision in names:
            col = names.index(decision)
        elif decision.lstrip("-").isdigit() and -width <= int(decision) < width:
            col = int(decision) % width
        else:
            raise UserError(f"--decision {decision}: no such column in {path} (columns: {', '.join(names[:6])}"
                            f"{', ...' if width > 6 else ''}; or a 0-based index below {width})")
        y, classes = _labels([r[col] for r in body], f"{path}, column {names[col]}")
    keep = [j for j in range(width) if j != col]
    x = np.empty((len(body), len(keep)))
    for i, r in enumerate(body):
        for jj, j in enumerate(keep):
            x[i, jj] = _number(r[j], f"{path}:{i + 1 + header}, column {names[j]}")
    if x.shape[1] == 0:
        raise UserError(f"{path}: no variables besides the decision")
    return Dataset(x, y, [names[j] for j in keep], classes, str(path))


def save_npz(path: Path, x: np.ndarray, y: np.ndarray) -> Path:
    """The data set as the file a placement's storage site holds (dist.stage moves its bytes)."""
    np.savez(path, x=x, y=y)
    return path


def madelon_like(n: int = 2000, p: int = 500, informative: int = 5, redundant: int = 15,
                 clusters_per_class: int = 16, flip: float = 0.01, seed: int = 0) -> Dataset:
    """Guyon's recipe (the NIPS 2003 MADELON design, as in scikit-learn's
    make_classification): Gaussian clusters on the vertices of a hypercube in the
    `informative` dimensions, each with a random covariance; `redundant` random linear
    combinations of them; the rest Gaussian probes; `flip` of the labels flipped; rows
    shuffled. Relevant variables are columns 0 .. informative+redundant-1."""
    if informative + redundant > p:
        raise UserError(f"madelon-like: {informative + redundant} relevant variables do not fit in {p}")
    if 2 * clusters_per_class > 2 ** informative:
        raise UserError(f"madelon-like: {2 * clusters_per_class} clusters need more than {informative} informative dimensions")
    rng = np.random.default_rng(seed)
    n_clusters = 2 * clusters_per_class
    # distinct hypercube vertices, side 2, centred on 0
    vertices = rng.permutation(2 ** informative)[:n_clusters]
    centroids = np.array([[(v >> b) & 1 for b in range(informative)] for v in vertices], dtype=float) * 2 - 1
    sizes = np.full(n_clusters, n // n_clusters)
    sizes[: n % n_clusters] += 1
    x = rng.standard_normal((n, p))
    y = np.empty(n, dtype=np.uint8)
    start = 0
    for c in range(n_clusters):
        rows = slice(start, start + sizes[c])
        cov = rng.uniform(-1, 1, (informative, informative))
        x[rows, :informative] = x[rows, :informative] @ cov + centroids[c]
        y[rows] = c % 2
        start += sizes[c]
    mix = rng.uniform(-1, 1, (informative, redundant))
    x[:, informative:informative + redundant] = x[:, :informative] @ mix
    flipped = rng.random(n) < flip
    y[flipped] = rng.integers(0, 2, flipped.sum())
    order = rng.permutation(n)
    names = [f"V{j + 1}" for j in range(p)]
    return Dataset(x[order], y[order], names, ["0", "1"], f"madelon-like(n={n}, p={p}, seed={seed})")
