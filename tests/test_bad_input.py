"""Bad input across every command, as a table: exit 2, one line on stderr, nothing created.

Each case runs the installed `geofed` in an empty working directory with its input
files elsewhere; afterwards the working directory must still be empty and no
namespace, testbed state or temporary geofed file may have appeared. The kinds of
mistake (issue 18): NaN and infinite numbers, zero and negative sizes, counts and
times, huge node counts, non-UTF-8 files, truncated and mis-shaped records, unknown
names, shell metacharacters in names.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import GEOFED
from record_samples import sample
from geofed import records
from geofed.federation import resolve
from geofed.testbed.host import netns_list

ICM = resolve("icm-task").read_text()


def fed_with(old: str, new: str) -> str:
    assert old in ICM, old
    return ICM.replace(old, new, 1)


# Federation files that must be refused, by every command that reads one.
BAD_FEDERATIONS = {
    "nan-fibre": fed_with("fibre_km = 900", "fibre_km = nan"),
    "inf-bandwidth": fed_with("bandwidth_gbps = 4.0", "bandwidth_gbps = inf"),
    "negative-fibre": fed_with("fibre_km = 900", "fibre_km = -1"),
    "zero-bandwidth": fed_with("bandwidth_gbps = 4.0", "bandwidth_gbps = 0"),
    "nan-speed": fed_with("speed = 0.92", "speed = nan"),
    "zero-nodes": fed_with("nodes = 2\n", "nodes = 0\n"),
    "loss-above-1": fed_with("bandwidth_gbps = 4.0", "bandwidth_gbps = 4.0\nloss = 1.5"),
    "nan-loss": fed_with("bandwidth_gbps = 4.0", "bandwidth_gbps = 4.0\nloss = nan"),
    "unknown-link-site": fed_with('sites = ["W", "G"]', 'sites = ["W", "X"]'),
    "shell-in-name": fed_with('name = "icm-task"', 'name = "x; rm -rf /"'),
    "string-latency": fed_with("latency_us = 2.0", 'latency_us = "fast"'),
    "truncated": ICM[: len(ICM) // 2] + "\n[[site\n",
    "not-utf8": "\udcff",  # written as a lone 0xff byte below
}

# A real federation may have 400 nodes at a site; a testbed on one host may not.
HUGE_SITE = fed_with("nodes = 2\n", "nodes = 400\n")
TESTBED_COMMANDS = [["testbed", "up", "{fed}"], ["run", "-f", "{fed}", "-p", "W1G1", "--dry-run", "--", "true"]]

FED_COMMANDS = [
    ["federation", "show", "{fed}"],
    ["testbed", "up", "{fed}"],
    ["run", "-f", "{fed}", "-p", "W1G1", "--dry-run", "--", "true"],
    ["predict", "mpi-latency", "-f", "{fed}", "-p", "W1G1"],
]

# Flags: every number is checked before anything starts.
NUMBERS = {"nan": "nan", "inf": "inf", "zero": "0", "negative": "-3", "word": "many"}
FLAG_CASES = [
    (["testbed", "verify", "icm-task", "--count", "{v}"], ("nan", "inf", "zero", "negative", "word")),
    (["testbed", "verify", "icm-task", "--seconds", "{v}"], ("nan", "inf", "zero", "negative")),
    (["run", "-p", "W1G1", "--timeout", "{v}", "--", "true"], ("nan", "inf", "zero", "negative")),
    (["run", "-p", "W1G1", "--ranks-per-node", "{v}", "--", "true"], ("zero", "negative", "word")),
    (["bench", "link", "--rtt", "{v}"], ("nan", "inf", "zero", "negative")),
    (["bench", "link", "--streams", "{v}"], ("zero", "negative", "word")),
    (["bench", "link", "--parts", "{v}"], ("word",)),
    (["bench", "mpi", "latency", "-p", "W1G1", "--budget", "{v}"], ("nan", "inf", "zero", "negative")),
    (["bench", "mpi", "latency", "-p", "W1G1", "--timeout", "{v}"], ("nan", "zero", "negative")),
    (["bench", "mpi", "bw", "-p", "W1G1", "--window", "{v}"], ("zero", "negative", "word")),
    (["bench", "matrix", "--budget", "{v}"], ("nan", "inf", "zero", "negative")),
    (["bench", "compare", "latency", "-p", "W1G1", "--osu", ".", "--repeat", "{v}"], ("zero", "negative")),
    (["mdfs", "run", "--dim", "{v}"], ("zero", "negative", "word")),
    (["mdfs", "run", "--threads", "{v}"], ("negative", "word")),
    (["mdfs", "run", "--level", "{v}"], ("nan", "inf", "negative")),
    (["mdfs", "run", "--pc-xi", "{v}"], ("nan", "inf", "zero", "negative")),
    (["mdfs", "run", "-p", "G1W1", "--timeout", "{v}"], ("nan", "zero", "negative")),
    (["mdfs", "sweep", "--repeat", "{v}"], ("zero", "negative")),
    (["obstacle", "-p", "G1W1", "--n", "{v}"], ("zero", "negative", "word")),
    (["obstacle", "-p", "G1W1", "--tol", "{v}"], ("nan", "inf", "zero", "negative")),
    (["obstacle", "-p", "G1W1", "--timeout", "{v}"], ("nan", "zero", "negative")),
    (["obstacle", "-p", "G1W1", "--c", "{v}"], ("nan", "inf", "negative")),
    (["bench", "obstacle", "--loss", "{v}"], ("nan", "inf", "negative")),
    (["workflow", "grayscott", "--L", "{v}"], ("zero", "negative", "word")),
    (["workflow", "grayscott", "--timeout", "{v}"], ("nan", "zero", "negative")),
    (["workflow", "grayscott", "--noise", "{v}"], ("nan", "inf", "negative")),
    (["workflow", "grayscott", "--sim-ranks", "{v}"], ("zero", "negative")),
    (["monitor", "run", "--count", "{v}"], ("zero", "negative")),
    (["monitor", "run", "--count", "1", "--interval", "{v}"], ("nan", "inf", "negative")),
    (["monitor", "run", "--duration", "{v}"], ("nan", "zero", "negative")),
    (["monitor", "show", "x.db", "--k", "{v}"], ("nan", "inf", "zero", "negative")),
    (["bench", "hpl", "-p", "W1G1", "--nb", "{v}"], ("zero", "negative", "word")),
    (["bench", "hpl", "-p", "W1G1", "--memory", "{v}"], ("nan", "inf", "zero", "negative")),
    (["bench", "hpl", "-p", "W1G1", "--n", "{v}"], ("zero", "negative", "word")),
    (["bench", "hpl", "-p", "W1G1", "--timeout", "{v}"], ("nan", "zero", "negative")),
    (["bench", "hpl", "-p", "W1G1", "--depth", "{v}"], ("negative", "word")),
    (["bench", "hpl-sweep", "--n", "{v}"], ("zero", "negative", "word")),
]

# Names a user can get wrong, some with shell metacharacters.
NAME_CASES = [
    ["federation", "show", "no-such-federation"],
    ["federation", "show", "icm-task; touch pwned"],
    ["testbed", "up", "$(touch pwned)"],
    ["run", "-p", "X1W1", "--", "true"],
    ["run", "-p", "G1;W1", "--", "true"],
    ["run", "-p", "`touch pwned`", "--", "true"],
    ["run", "-p", "G3", "--dry-run", "--", "true"],
    ["run", "-p", "W[1]G[3]", "--dry-run", "--", "true"],
    ["run", "-p", "W1,G1", "--dry-run", "--", "true"],
    ["run", "-p", "W[$(touch pwned)]", "--", "true"],
    ["run", "-p", "G1W1", "--hostfile", "{in}/missing-hostfile", "--", "true"],
    ["run", "-p", "G1W1", "--hostfile", "{in}/hosts-bad-site", "--", "true"],
    ["run", "-p", "G1W1", "--hostfile", "{in}/not-utf8", "--", "true"],
    ["bench", "mpi", "no-such-benchmark", "-p", "W1G1"],
    ["bench", "mpi", "latency", "-p", "W1G1", "--sizes", "1,x"],
    ["bench", "mpi", "allreduce", "-p", "W1"],
    ["bench", "matrix", "-p", "W1"],
    ["bench", "compare", "latency", "-p", "W1G1", "--osu", "{in}/no-such-osu"],
    ["bench", "compare", "latency", "-p", "W1G1"],
    ["bench", "check", "{in}/no-such-run.json", "--references", "{in}/refs.toml"],
    ["bench", "check", "{in}/truncated/record-0.json", "--references", "{in}/not-utf8"],
    ["mdfs", "run", "{in}/not-utf8"],
    ["mdfs", "run", "{in}/missing.csv"],
    ["mdfs", "run", "{in}/nan.csv"],
    ["mdfs", "run", "--hostfile", "{in}/hosts-bad-site"],
    ["mdfs", "run", "-p", "G1W1", "--split", "even", "--hostfile", "{in}/hosts-bad-site"],
    ["obstacle", "-p", "X1"],
    ["obstacle", "-p", "G1W1", "--secret-file", "{in}/missing-secret"],
    ["workflow", "grayscott", "--sim-site", "X"],
    ["workflow", "grayscott", "--analysis-site", "$(touch pwned)"],
    ["workflow", "grayscott", "--settings", "{in}/not-utf8"],
    ["workflow", "grayscott", "--settings", "{in}/nan-settings.json"],
    ["workflow", "grayscott", "--settings", "{in}/truncated.json"],
    ["bench", "grayscott", "--sizes", "64:0"],
    ["bench", "grayscott", "--repeat", "0"],
    ["bench", "remote-write", "--node", "X9"],
    ["bench", "remote-write", "--node", "W1"],
    ["bench", "remote-write", "--filesystem", "W:$(touch pwned)"],
    ["bench", "remote-write", "--size", "1G", "--record", "3000"],
    ["bench", "remote-write", "--size", "0"],
    ["monitor", "run", "--count", "1", "--pairs", "W1-X9"],
    ["predict", "mpi-latency", "-f", "icm-task", "-p", "Q1"],
    ["advise", "mpi-latency", "-f", "icm-task", "--nodes", "0"],
    ["model", "calibrate", "-f", "icm-task", "{in}/no-such-records"],
    ["bench", "hpl", "-p", "W1G1", "--n", "40"],
    ["bench", "hpl", "-p", "W1G1", "--grid", "2x2"],
    ["bench", "hpl", "-p", "W1G1", "--grid", "2;x"],
    ["bench", "hpl", "-p", "W1G1", "--bcast", "ring"],
    ["bench", "hpl", "-p", "W1G1", "--memory", "0.95"],
    ["bench", "hpl", "-p", "W1G1", "--n", "1000", "--memory", "0.1"],
    ["bench", "hpl", "-p", "Z1"],
    ["bench", "hpl", "-p", "W1G1", "--depth", "3"],
    ["bench", "hpl-sweep", "--placements", "W2,G1W1"],
    ["bench", "hpl-sweep", "--placements", "W1,Q1"],
    ["report", "{in}/empty"],
    ["report", "{in}/truncated"],
    ["report", "{in}/no-such-directory"],
]


def _record_kinds() -> list[str]:
    from geofed import report
    report.load_sections()
    return sorted(report.SECTIONS)


# Records with the envelope (schema, kind, created, meta, data) whose data does not fit their kind:
# none at all, or a kind's sample with these fields changed.
MIS_SHAPED = {"empty": None, "wrong-types": {"rows": "x", "results": 3, "pairs": None, "steps": "x", "cases": 1},
              "nested-nonsense": {"sizes": [{"size": "big"}], "runs": [[]], "series": {"a": 1}}}
REPORT_CASES = [(kind, shape) for kind in _record_kinds() for shape in MIS_SHAPED]


def _inputs(d: Path) -> None:
    d.mkdir()
    (d / "not-utf8").write_bytes(b"\xff\xfe garbage \x80\n")
    (d / "hosts-bad-site").write_text("node1 X\n")
    (d / "nan.csv").write_text("a,b,y\n1,nan,0\n2,3,1\n")
    (d / "nan-settings.json").write_text('{"L": 64, "F": NaN}')
    (d / "truncated.json").write_text('{"L": 64, "steps"')
    (d / "refs.toml").write_text("")
    (d / "empty").mkdir()
    (d / "truncated").mkdir()
    text = records.dumps(records.make("bench.mpi", sample("bench.mpi")))
    (d / "truncated" / "record-0.json").write_text(text[: len(text) // 2])
    (d / "huge-site.toml").write_text(HUGE_SITE)
    for name, text in BAD_FEDERATIONS.items():
        path = d / f"{name}.toml"
        if name == "not-utf8":
            path.write_bytes(b"name = \"x\xff\"\n")
        else:
            path.write_text(text)


def _state() -> dict:
    """What a case could have left: the icm-task testbed's namespaces and state (every
    federation here is named icm-task or is refused by name); temporary files go to the
    case's own TMPDIR, checked apart, so other work on the host does not count."""
    run = {p for p in os.listdir("/run/geofed") if p == "icm-task"} if os.path.isdir("/run/geofed") else set()
    return {"netns": {n for n in netns_list() if n.startswith("geofed-icm-task.")}, "run": run}


@pytest.fixture
def dirs(tmp_path):
    _inputs(tmp_path / "in")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (tmp_path / "tmp").mkdir()
    return tmp_path / "in", cwd


def assert_refused(argv: list[str], dirs, fragment: str | None = None) -> None:
    inp, cwd = dirs
    argv = [a.replace("{in}", str(inp)) for a in argv]
    before = _state()
    tmp = cwd.parent / "tmp"
    res = subprocess.run([GEOFED, *argv], cwd=cwd, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, TMPDIR=str(tmp)))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, (argv, res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, (argv, res.stderr)
    assert len(lines) == 1, (argv, res.stderr)
    if fragment:
        assert fragment in lines[0], (argv, lines[0])
    assert list(cwd.iterdir()) == [], (argv, "created", list(cwd.iterdir()))
    assert list(tmp.iterdir()) == [], (argv, "left in TMPDIR", list(tmp.iterdir()))
    assert not (cwd.parent / "pwned").exists() and not (cwd / "pwned").exists()
    after = _state()
    for what in before:
        assert after[what] <= before[what], (argv, what, after[what] - before[what])


@pytest.mark.parametrize("name", sorted(BAD_FEDERATIONS))
@pytest.mark.parametrize("command", FED_COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_bad_federation(command, name, dirs):
    path = str(dirs[0] / f"{name}.toml")
    assert_refused([a.replace("{fed}", path) for a in command], dirs, fragment=path)


@pytest.mark.parametrize("command", TESTBED_COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_federation_too_big_for_a_testbed(command, dirs):
    path = str(dirs[0] / "huge-site.toml")
    assert_refused([a.replace("{fed}", path) for a in command], dirs, fragment="too big for a testbed")


@pytest.mark.parametrize("argv", [[a.replace("{v}", NUMBERS[k]) for a in argv] for argv, kinds in FLAG_CASES
                                  for k in kinds], ids=lambda a: " ".join(a))
def test_bad_number(argv, dirs):
    assert_refused(argv, dirs)


@pytest.mark.parametrize("argv", NAME_CASES, ids=lambda a: " ".join(a))
def test_bad_name_or_file(argv, dirs):
    assert_refused(argv, dirs)


@pytest.mark.parametrize("kind,shape", REPORT_CASES)
def test_mis_shaped_record(kind, shape, dirs):
    inp, cwd = dirs
    rdir = inp / f"records-{kind}"
    rdir.mkdir()
    data = {} if MIS_SHAPED[shape] is None else sample(kind, **MIS_SHAPED[shape])
    (rdir / "r.json").write_text(json.dumps(records.make(kind, sample(kind)).to_dict() | {"data": data}))
    out = inp / "report-out"
    assert_refused(["report", str(rdir), "--out", str(out)], dirs, fragment=kind)
    assert not out.exists() or list(out.iterdir()) == []


def test_the_table_is_big_enough():
    n = (len(BAD_FEDERATIONS) * len(FED_COMMANDS) + sum(len(k) for _, k in FLAG_CASES) + len(NAME_CASES)
         + len(REPORT_CASES))
    assert n >= 100
