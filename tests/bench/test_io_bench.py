"""`geofed bench io`: the grid and its budget, the modes' open flags, O_DIRECT where the
file system cannot do it, data read back, bad input, and IOzone and fio on real runs."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from geofed import validate
from geofed.bench import iolib, storage, storage_peers
from geofed.errors import UserError
from tests.conftest import GEOFED

K, M = 1 << 10, 1 << 20


def io(*args, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([GEOFED, "bench", "io", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def record_of(out_dir: Path) -> dict:
    (path,) = out_dir.glob("bench.io-*.json")
    return json.loads(path.read_text())["data"]


def left_by_io(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith("geofed-io-")]


@pytest.fixture
def disk(tmp_path) -> Path:
    """A directory whose file system takes O_DIRECT, or a skip saying why not."""
    why = storage.direct_support(tmp_path)
    if why:
        pytest.skip(f"{tmp_path}: direct {why}; the flag checks need a disk file system")
    return tmp_path


# ---------------------------------------------------------------- the grid and its budget


def test_grid_sizes_in_powers_of_four_and_records_up_to_each_file():
    sizes = validate.parse_sizes("64K:16M:4", "--sizes")
    assert sizes == [64 * K, 256 * K, 1 * M, 4 * M, 16 * M]
    records = validate.parse_sizes(storage.default_records(max(sizes)), "--records")
    assert records == [4 * K, 16 * K, 64 * K, 256 * K, 1 * M, 4 * M, 16 * M]
    assert storage.records_for(256 * K, records) == [4 * K, 16 * K, 64 * K, 256 * K]
    assert validate.parse_sizes(storage.default_records(1 * M), "--records")[-1] == 1 * M
    storage.check_grid(sizes, records, list(storage.MODES))  # IOzone's own grid is valid
    with pytest.raises(UserError, match=r"--records: 'lots' is not a size"):
        validate.parse_sizes("4K:lots", "--records")
    with pytest.raises(UserError, match="whole factor of 2 or more"):
        validate.parse_sizes("4K:1M:1", "--records")


@pytest.mark.parametrize("sizes,records,modes,message", [
    ([64 * K], [1 * M], ["buffered"], "--records 1M: larger than the largest file (--sizes up to 64K)"),
    ([64 * K], [1536], ["buffered"], "records are whole KiB"),
    ([100 * K], [64 * K], ["buffered"], "--sizes 100K is not a whole number of 64K records"),
    ([48 * K], [6 * K, 8 * K], ["buffered", "direct"], "--records 6K: O_DIRECT (--modes direct) needs records in "
                                                       "multiples of 4096 bytes"),
])
def test_grids_that_cannot_run_are_refused(sizes, records, modes, message):
    with pytest.raises(UserError) as e:
        storage.check_grid(sizes, records, modes)
    assert message in str(e.value)


def test_forecast_scales_a_record_with_the_file_and_a_new_record_as_the_largest_known():
    f = storage.Forecast()
    assert f.row(64 * K, [4 * K], ["sync"]) is None  # nothing measured: the first row always runs
    f.add(64 * K, 4 * K, "sync", 1.0)
    f.add(64 * K, 64 * K, "sync", 0.2)
    # one size measured: proportional to the file; the new 256K record costs as 64K did
    assert f.cell(256 * K, 4 * K, "sync") == pytest.approx(4.0)
    assert f.row(256 * K, [4 * K, 64 * K, 256 * K], ["sync"]) == pytest.approx(4.0 + 0.8 + 0.8)
    # two sizes: a fixed part and a part that grows, a + b x size
    f.add(256 * K, 4 * K, "sync", 1.6)  # a = 0.8 s, b = 0.2 s per 64K
    assert f.cell(1 * M, 4 * K, "sync") == pytest.approx(0.8 + 0.2 * 16)


def test_budget_skips_the_largest_sizes_and_says_which(tmp_path):
    done = io("--sizes", "64K,256K,1M", "--records", "4K", "--modes", "buffered", "--repeat", "1",
              "--budget", "0.001", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "skipping file sizes 256K, 1M" in done.stderr
    assert "skipped by --budget 0.001 s: file sizes 256K, 1M" in done.stdout
    data = record_of(tmp_path / "out")
    assert data["skipped_sizes"] == [256 * K, 1 * M] and data["sizes"] == [64 * K]
    assert {c["size"] for c in data["cells"]} == {64 * K}
    assert left_by_io(tmp_path) == []


def test_agreement_counts_like_for_like_cells_and_the_peers_own_repeatability():
    def cell(op, geofed, runs, comparable=True, size=64 * M):
        return {"op": op, "size": size, "geofed_mbps": geofed, "ratio_iozone": geofed / sorted(runs)[1],
                "iozone_runs": runs, "iozone_comparable": comparable}
    cells = [cell("write", 100, [100, 105, 95]), cell("rewrite", 150, [100, 130, 90]),
             cell("read", 500, [100, 100, 100], comparable=False), cell("reread", 10000, [9000, 9500, 9600], size=1 * M)]
    a = storage.agreement(cells, "iozone")
    assert (a["cells"], a["within"]) == (3, 2)  # the read IOzone times warm is left out; 1.5 is not within 10 %
    assert (a["long_cells"], a["long_within"]) == (2, 1)  # the 1 MiB cached reread took 0.1 ms
    assert (a["self_cells"], a["self_within"]) == (3, 2)  # 100 vs 105 and 9000 vs 9500 agree, 100 vs 130 does not


@pytest.mark.parametrize("op, mode, cache_read, prereads", [
    ("read", "buffered", False, True),     # after a drop: IOzone's untimed start pulls the read-ahead in
    ("reread", "sync", False, True),       # sshfs dropped the pages at open: the same
    ("reread", "buffered", True, False),   # a reread of memory for both
    ("read", "direct", False, False),      # O_DIRECT has no read-ahead
    ("write", "buffered", False, False),
])
def test_iozone_read_passes_that_start_from_storage_are_not_compared(op, mode, cache_read, prereads):
    assert storage.iozone_prereads(op, mode, cache_read) is prereads


# ---------------------------------------------------------------- modes and their flags


def fdinfo_flags(fd: int) -> int:
    for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
        if line.startswith("flags:"):
            return int(line.split()[1], 8)
    raise AssertionError("no flags line in fdinfo")


@pytest.mark.parametrize("mode", storage.MODES)
@pytest.mark.parametrize("op", storage.OPS)
def test_every_mode_opens_its_files_with_its_flags(disk, mode, op):
    path = disk / "f"
    path.write_bytes(b"\0" * 4096)
    fd = storage.open_fd(path, mode, op)
    try:
        flags = fdinfo_flags(fd)
    finally:
        os.close(fd)
    assert flags & os.O_ACCMODE == (os.O_WRONLY if op in storage.WRITES else os.O_RDONLY)
    assert bool(flags & os.O_DIRECT) == (mode == "direct")
    assert (flags & os.O_SYNC == os.O_SYNC) == (mode == "sync")  # O_SYNC is O_DSYNC plus __O_SYNC
    assert bool(flags & os.O_DSYNC) == (mode == "sync")


def test_a_direct_pass_bypasses_the_page_cache_and_a_buffered_one_does_not(disk):
    path = disk / "f"
    storage.one_pass(path, "buffered", "write", 256 * K, 64 * K, 1)
    assert iolib.resident(path) == 1.0
    storage.one_pass(path, "direct", "write", 256 * K, 64 * K, 1)
    assert iolib.resident(path) == 0.0
    storage.one_pass(path, "buffered", "read", 256 * K, 64 * K, 1)
    iolib.drop_cache(path)
    assert iolib.resident(path) == 0.0


def test_direct_on_tmpfs_is_reported_as_not_supported(tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm on this machine")
    before = set(left_by_io(shm))
    done = io("--path", str(shm), "--sizes", "64K", "--records", "64K", "--modes", "buffered,direct", "--repeat", "1",
              "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "direct: not supported by this file system" in done.stdout
    data = record_of(tmp_path / "out")
    assert data["unsupported"]["direct"].startswith("not supported by this file system")
    assert data["filesystem"] == "tmpfs"
    assert {c["mode"] for c in data["cells"]} == {"buffered"}
    assert set(left_by_io(shm)) == before


# ---------------------------------------------------------------- the data moved


def test_a_cell_reads_back_what_it_wrote_and_a_changed_byte_is_caught(tmp_path):
    path = tmp_path / "f"
    cell = storage.geofed_cell(path, 256 * K, 16 * K, "buffered", list(storage.OPS), drop=True, seed=1)
    assert set(cell) == set(storage.OPS) and all(v["mbps"] > 0 for v in cell.values())
    assert cell["read"]["resident"] == 0.0 and cell["reread"]["resident"] == 1.0
    assert not path.exists()

    storage.one_pass(path, "buffered", "write", 256 * K, 16 * K, 7)
    assert storage.verify(path, "buffered", 256 * K, 16 * K, 7) == 0
    assert storage.verify(path, "buffered", 256 * K, 16 * K, 8) > 0  # another generation's data is not this one's
    with open(path, "r+b") as f:
        f.seek(100 * K + 123)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert storage.verify(path, "buffered", 256 * K, 16 * K, 7) == 1
    assert storage.one_pass(path, "buffered", "read", 256 * K, 16 * K, 7)[1] == 0  # body bytes: verify's job
    with open(path, "r+b") as f:  # the stamp of the record at 32K now names another offset
        f.seek(32 * K)
        f.write((48 * K).to_bytes(8, sys.byteorder))
    assert storage.one_pass(path, "buffered", "read", 256 * K, 16 * K, 7)[1] == 1
    assert storage.one_pass(path, "buffered", "randread", 256 * K, 16 * K, 7, seed=3)[1] == 1


# ---------------------------------------------------------------- bad input and interruption


@pytest.mark.parametrize("args,fragment", [
    (["--modes", "buffered,fast"], "unknown 'fast'"),
    (["--ops", "write,append"], "unknown 'append'"),
    (["--peers", "bonnie"], "unknown 'bonnie'"),
    (["--sizes", "64K", "--records", "1M"], "--records 1M: larger than the largest file"),
    (["--sizes", "64K", "--records", "6K", "--modes", "direct"], "O_DIRECT (--modes direct) needs records in "
                                                                "multiples of 4096 bytes"),
    (["--path", "{tmp}/no-such-dir"], "no-such-dir: no such directory"),
    (["--path", "{tmp}/a-file"], "a-file: not a directory"),
    (["--path", "/proc"], "--path /proc: cannot write there"),
    (["--sizes", "big"], "--sizes: 'big' is not a size"),
    (["--repeat", "0"], "expected a positive integer"),
    (["--budget", "-1"], "expected a positive number"),
])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path, args, fragment):
    (tmp_path / "a-file").write_text("x")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    done = io(*[a.replace("{tmp}", str(tmp_path)) for a in args], "--out", str(cwd / "out"), cwd=cwd)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert fragment in lines[0]
    assert list(cwd.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "cwd"]


def test_records_iozone_cannot_take_are_refused_before_anything_runs(tmp_path):
    if not installed("iozone"):
        pytest.skip("iozone is not installed (./setup.sh installs it)")
    done = io("--sizes", "64M", "--records", "32M", "--peers", "iozone", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip() == ("geofed: error: --records up to 32M: IOzone takes records "
                                                            "up to 16M (--peers iozone)")
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_stops_the_run_and_removes_its_files(tmp_path):
    proc = subprocess.Popen([GEOFED, "bench", "io", "--sizes", "64K,64M", "--records", "16K", "--modes", "sync",
                             "--repeat", "3", "--budget", "100000", "--out", str(tmp_path / "out")],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:  # the 64M row has begun: its files are on disk
            if "file size 64M" in line:
                break
        assert left_by_io(tmp_path), "the run's directory should exist while it runs"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130
    assert left_by_io(tmp_path) == [] and not (tmp_path / "out").exists()


# ---------------------------------------------------------------- peers on real runs


def installed(peer: str) -> bool:
    try:
        storage_peers.binary(peer)
    except UserError:
        return False
    return True


@pytest.mark.parametrize("peer", storage_peers.PEERS)
@pytest.mark.parametrize("mode", ["buffered", "direct"])
def test_a_peer_runs_the_same_cell_and_its_figures_are_read(disk, peer, mode):
    if not installed(peer):
        pytest.skip(f"{peer} is not installed (./setup.sh installs it)")
    path = disk / "geofed-io.dat"
    got = storage_peers.run(peer, path, 1 * M, 64 * K, mode, list(storage.OPS), drop=True)
    assert set(got) == set(storage.OPS)
    assert all(v["mbps"] and v["mbps"] > 0 for v in got.values()), got
    if peer == "iozone":  # geofed dropped the pages before IOzone's read phase
        assert got["read"]["resident"] == 0.0
    assert not path.exists()
    assert storage_peers.version(peer)[0].isdigit()


def test_the_command_sets_peers_beside_geofed_and_the_report_draws_the_maps(disk):
    peers = [p for p in storage_peers.PEERS if installed(p)]
    if not peers:
        pytest.skip("neither iozone nor fio is installed (./setup.sh installs them)")
    done = io("--path", str(disk), "--sizes", "64K,256K", "--records", "64K", "--modes", "buffered,direct",
              "--ops", "write,read,reread", "--repeat", "1", "--peers", ",".join(peers),
              "--out", str(disk / "out"), cwd=disk)
    assert done.returncode == 0, done.stderr
    data = record_of(disk / "out")
    assert len(data["cells"]) == 2 * 2 * 3
    for c in data["cells"]:
        for p in peers:
            assert c[f"{p}_mbps"] > 0 and c[f"ratio_{p}"] == pytest.approx(c["geofed_mbps"] / c[f"{p}_mbps"])
    reread = [c for c in data["cells"] if c["op"] == "reread" and c["mode"] == "buffered"]
    assert all(c["cache_read"] for c in reread) and "cache 100%" in done.stdout
    assert data["verified_bytes"] == 2 * (64 * K + 256 * K)
    assert left_by_io(disk) == []

    out = subprocess.run([GEOFED, "report", str(disk / "out")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    html = (disk / "out" / "report.html").read_text()
    assert "<h2>Storage: IOzone" in html
    for name in ["io-0-buffered.png", "io-0-direct.png"] + [f"io-0-buffered-{p}.png" for p in peers]:
        assert (disk / "out" / name).stat().st_size > 0 and name in html
    shutil.rmtree(disk / "out")
