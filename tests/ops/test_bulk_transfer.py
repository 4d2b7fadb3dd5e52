"""geofed transfer on a real testbed: real TCP across the emulated link, real files, real kills."""

import hashlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from geofed import federation
from geofed.errors import UserError
from geofed.ops import transfer, xfer_ends
from geofed.testbed import core
from tests.conftest import GEOFED, needs_root, no_leftovers, run_geofed, two_site_federation

NAME = "xfer-test"


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    path = tmp_path_factory.mktemp("fed") / "xfer.toml"
    path.write_text(two_site_federation(NAME, rtt_ms=2.0, gbps=1.0))
    f = federation.load(path)
    core.up(f)
    yield f
    core.down(NAME)
    assert no_leftovers(NAME) == []


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make(path: Path, nbytes: int, seed: int = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(random.Random(seed).randbytes(nbytes))
    return path


@needs_root
def test_a_file_and_a_tree_arrive_identical(fed, tmp_path):
    src = make(tmp_path / "src.bin", 21 * (1 << 20) + 12345)
    data = transfer.run(fed, f"A1:{src}", f"B1:{tmp_path / 'dst.bin'}", streams=3, chunk=4 << 20)
    assert sha(tmp_path / "dst.bin") == sha(src)
    assert data["moved_bytes"] == src.stat().st_size and data["held_bytes"] == 0
    assert not list(tmp_path.glob("*" + xfer_ends.PARTIAL + "*"))
    tree = tmp_path / "tree"
    for rel, n in (("a.bin", 5000), ("sub/b.bin", 3 << 20), ("sub/deeper/c.bin", 1), ("empty.bin", 0)):
        make(tree / rel, n, seed=n)
    transfer.run(fed, f"A2:{tree}", f"B1:{tmp_path / 'copy'}", streams=2, chunk=1 << 20)
    for f in tree.rglob("*"):
        if f.is_file():
            assert sha(tmp_path / "copy" / f.relative_to(tree)) == sha(f), f


# A tree as a data manager has it: checked at the destination with find and stat, not with geofed.
MTIME_NS = 1_577_934_245_123_456_789  # 2020-01-02 03:04:05.123456789 UTC
SPARSE_SIZE = 64 << 20


def make_tree(root: Path, big: int = 0) -> Path:
    """An empty directory, a symbolic link, a hard link, a sparse file, modes 600/640/755,
    an owner other than root, set mtimes and a FIFO (not sent); with big, a file of that
    many bytes named to come last."""
    (root / "empty").mkdir(parents=True)
    (root / "sub" / "deeper").mkdir(parents=True)
    for rel, mode in (("secret.txt", 0o600), ("sub/data.csv", 0o640), ("run.sh", 0o755)):
        make(root / rel, 5000 + mode, seed=mode).chmod(mode)
    os.chown(root / "sub/data.csv", 4321, 8765)
    os.link(root / "sub/data.csv", root / "sub/deeper/same.csv")
    (root / "latest").symlink_to("sub/data.csv")
    with open(root / "sparse.img", "wb") as f:  # data, a hole, data, and a hole to the end
        f.write(random.Random(7).randbytes(100_000))
        f.seek(20 << 20)
        f.write(random.Random(8).randbytes(3 << 20))
        f.truncate(SPARSE_SIZE)
    os.mkfifo(root / "pipe")
    if big:
        make(root / "zz-big.bin", big, seed=9)
    for p in sorted(root.rglob("*"), key=lambda p: -len(p.parts)) + [root]:  # a directory after what it holds
        os.utime(p, ns=(MTIME_NS, MTIME_NS + len(p.name)), follow_symlinks=False)
    return root


def listing(root: Path) -> list[str]:
    """find's view of a tree: path, type, mode, owner, size, mtime, link count, link target."""
    out = subprocess.run(["find", str(root), "-printf", r"%P %y %m %U:%G %s %T@ %n %l\n"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(out.splitlines())


def stat_of(path: Path, fmt: str) -> str:
    return subprocess.run(["stat", "-c", fmt, str(path)], capture_output=True, text=True, check=True).stdout.strip()


def assert_same_tree(src: Path, dst: Path) -> None:
    want = [line for line in listing(src) if not line.startswith("pipe ")]
    assert listing(dst) == want
    kinds = [line.split()[:2] for line in want if line.startswith(("empty ", "latest "))]
    assert kinds == [["empty", "d"], ["latest", "l"]]  # the tree holds what it is meant to
    # one inode for the two names of the hard link
    assert stat_of(dst / "sub/data.csv", "%i") == stat_of(dst / "sub/deeper/same.csv", "%i")
    # the holes stay holes: the data's 3.1 MB allocated, not the file's 64 MiB
    allocated = int(stat_of(dst / "sparse.img", "%b")) * int(stat_of(dst / "sparse.img", "%B"))
    assert allocated <= int(stat_of(src / "sparse.img", "%b")) * 512 + (1 << 20) and allocated < 8 << 20
    for rel in ("sparse.img", "secret.txt", "sub/data.csv", "run.sh"):
        assert sha(dst / rel) == sha(src / rel), rel
    assert not list(dst.rglob("*" + xfer_ends.PARTIAL + "*"))


@needs_root
def test_a_tree_arrives_with_its_metadata(fed, tmp_path):
    src = make_tree(tmp_path / "project")
    assert not (tmp_path / "copy").exists()
    data = transfer.run(fed, f"A1:{src}", f"B1:{tmp_path / 'copy'}", streams=2, chunk=1 << 20)
    assert_same_tree(src, tmp_path / "copy")
    assert data["tree"] == {"file": 4, "dir": 4, "link": 1, "hardlink": 1, "deleted": 0, "not_sent": 1}
    written = 100_000 + (3 << 20) + 3 * 5000 + 0o600 + 0o640 + 0o755  # the holes are not sent
    assert data["moved_bytes"] == data["bytes"] and written <= data["bytes"] < written + (1 << 20)
    # the same command again: every file is there with its size and mtime, nothing moves
    again = transfer.run(fed, f"A1:{src}", f"B1:{tmp_path / 'copy'}", streams=2, chunk=1 << 20)
    assert again["moved_bytes"] == 0 and again["held_bytes"] == data["bytes"]
    assert_same_tree(src, tmp_path / "copy")


@needs_root
def test_copy_links_sends_what_a_link_points_to(fed, tmp_path):
    src = make_tree(tmp_path / "project")
    transfer.run(fed, f"A1:{src}", f"B1:{tmp_path / 'copy'}", copy_links=True)
    assert stat_of(tmp_path / "copy/latest", "%F") == "regular file"
    assert sha(tmp_path / "copy/latest") == sha(src / "sub/data.csv")


@needs_root
def test_an_interrupted_tree_says_how_to_resume_and_the_same_command_completes_it(fed, tmp_path):
    src = make_tree(tmp_path / "project", big=48 << 20)
    dst = tmp_path / "copy"
    manifest = Path(str(dst / "zz-big.bin") + xfer_ends.MANIFEST)
    proc = started(fed, src, dst, manifest)  # the receiver has verified chunks of the last file
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "run the same command again to resume" in err.strip().splitlines()[-1], err
    assert _ends(tmp_path) == []  # the ends were stopped with it
    # the files that arrived have their names; only the one arriving is partial
    assert sorted(p.name for p in dst.rglob("*" + xfer_ends.PARTIAL + "*")) == \
        ["zz-big.bin" + xfer_ends.PARTIAL, "zz-big.bin" + xfer_ends.MANIFEST]
    assert sha(dst / "sparse.img") == sha(src / "sparse.img")
    held = len(verified(manifest)) << 20
    # the same command (streams and chunks): the files that arrived and the verified chunks are not sent again
    data = transfer.run(fed, f"A1:{src}", f"B1:{dst}", streams=1, chunk=1 << 20)
    assert data["moved_bytes"] == (48 << 20) - held and data["held_bytes"] == data["bytes"] - data["moved_bytes"]
    assert_same_tree(src, dst)


@needs_root
def test_delete_removes_what_is_gone_at_the_source_and_nothing_else(fed, tmp_path):
    src, dst = make_tree(tmp_path / "project"), tmp_path / "copy"
    transfer.run(fed, f"A1:{src}", f"B1:{dst}")
    outside = make(tmp_path / "neighbour" / "keep.bin", 100)
    kept = sha(outside)
    # gone at the source: a file, a directory with what it holds; new: a file
    (src / "secret.txt").unlink()
    (src / "sub/deeper/same.csv").unlink()
    (src / "sub/deeper").rmdir()
    make(src / "new.txt", 10)
    # at the destination only: a file, and a link to a directory outside the destination
    make(dst / "stray.log", 10)
    (dst / "outside").symlink_to(tmp_path / "neighbour")
    # without --delete nothing goes
    transfer.run(fed, f"A1:{src}", f"B1:{dst}")
    assert (dst / "secret.txt").exists() and (dst / "sub/deeper/same.csv").exists() and (dst / "new.txt").exists()
    before = listing(dst)
    # a dry run says what would go and changes nothing
    preview = run_geofed("transfer", "-f", str(fed.path), f"A1:{src}", f"B1:{dst}", "--delete", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    deletes = [line.split()[1] for line in preview.stdout.splitlines() if line.startswith("delete ")]
    assert deletes == ["outside", "secret.txt", "stray.log", "sub/deeper"]
    assert "not sent pipe" in preview.stdout and "0 file(s) to send" in preview.stdout
    assert listing(dst) == before
    res = run_geofed("transfer", "-f", str(fed.path), f"A1:{src}", f"B1:{dst}", "--delete")
    assert res.returncode == 0 and "deleted 4" in res.stdout, res.stderr
    assert listing(dst) == [line for line in listing(src) if not line.startswith("pipe ")]
    assert sha(outside) == kept


@needs_root
def test_a_directory_where_the_source_has_a_file_is_refused_without_delete(fed, tmp_path):
    src, dst = make_tree(tmp_path / "project"), tmp_path / "copy"
    make(dst / "run.sh" / "results.dat", 10)
    res = run_geofed("transfer", "-f", str(fed.path), f"A1:{src}", f"B1:{dst}")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert f"{dst / 'run.sh'} is a directory" in res.stderr and "--delete" in res.stderr
    assert (dst / "run.sh" / "results.dat").exists()
    transfer.run(fed, f"A1:{src}", f"B1:{dst}", delete=True)
    assert_same_tree(src, dst)

@needs_root
def test_a_killed_sender_resumes_and_a_damaged_chunk_is_sent_again(fed, tmp_path):
    src = make(tmp_path / "big.bin", 60 << 20)
    dst = tmp_path / "out.bin"
    manifest = Path(str(dst) + xfer_ends.MANIFEST)
    # the whole command, killed with SIGKILL (its ends too) once some chunks are verified
    proc = started(fed, src, dst, manifest)
    for pid in _ends(tmp_path):
        os.kill(pid, signal.SIGKILL)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    held = verified(manifest)
    assert 5 <= len(held) < 60 and not dst.exists()
    # damage a verified chunk on disk: it must be found and sent again
    first = int(held[0].split()[0])
    partial = Path(str(dst) + xfer_ends.PARTIAL)
    with open(partial, "r+b") as f:
        f.seek(first + 100)
        byte = f.read(1)
        f.seek(first + 100)
        f.write(bytes([byte[0] ^ 0xFF]))
    data = transfer.run(fed, f"A1:{src}", f"B1:{dst}", streams=2, chunk=1 << 20)
    assert sha(dst) == sha(src)
    assert data["corrupt_found"] == 1
    assert data["held_bytes"] == (len(held) - 1) << 20  # everything verified but the damaged chunk
    assert data["moved_bytes"] == src.stat().st_size - data["held_bytes"]
    assert not partial.exists() and not manifest.exists()


@needs_root
def test_a_killed_receiver_fails_the_command_and_the_same_command_resumes(fed, tmp_path):
    src = make(tmp_path / "big.bin", 48 << 20, seed=3)
    dst = tmp_path / "out.bin"
    manifest = Path(str(dst) + xfer_ends.MANIFEST)
    proc = started(fed, src, dst, manifest)
    for pid in _ends(tmp_path, "recv"):
        os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "run the same command again to resume" in err, err
    assert _ends(tmp_path) == []  # the sender was stopped with it
    held = len(verified(manifest))
    data = transfer.run(fed, f"A1:{src}", f"B1:{dst}", streams=2, chunk=1 << 20)
    assert sha(dst) == sha(src) and data["held_bytes"] == held << 20
    assert data["moved_bytes"] == src.stat().st_size - data["held_bytes"]


@needs_root
def test_a_source_changed_since_the_interruption_is_sent_whole(fed, tmp_path):
    src = make(tmp_path / "big.bin", 24 << 20, seed=4)
    dst = tmp_path / "out.bin"
    proc = started(fed, src, dst, Path(str(dst) + xfer_ends.MANIFEST))
    for pid in _ends(tmp_path):
        os.kill(pid, signal.SIGKILL)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    make(src, 24 << 20, seed=5)  # the same size, other bytes, a newer mtime
    data = transfer.run(fed, f"A1:{src}", f"B1:{dst}", streams=1, chunk=1 << 20)
    assert data["held_bytes"] == 0 and data["moved_bytes"] == 24 << 20 and sha(dst) == sha(src)


def make_small_files(root: Path, files: int, nbytes: int) -> Path:
    """A data set of many small files: 500 to a directory, sizes 0 to nbytes, set mtimes."""
    rng = random.Random(11)
    for k in range(files):
        path = make(root / f"d{k // 500:02d}" / f"f{k:05d}.dat", rng.randint(0, nbytes), seed=k)
        os.utime(path, ns=(MTIME_NS, MTIME_NS + k))
    return root


def sums(root: Path) -> list[str]:
    """sha256sum of every file under root, by relative path (coreutils, not geofed)."""
    out = subprocess.run("find . -type f -print0 | sort -z | xargs -0 sha256sum", shell=True, cwd=root,
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()


@needs_root
def test_a_tree_of_thousands_of_small_files_arrives_intact(fed, tmp_path):
    src = make_small_files(tmp_path / "set", 3000, 20_000)
    data = transfer.run(fed, f"A1:{src}", f"B1:{tmp_path / 'copy'}", streams=2)
    assert listing(tmp_path / "copy") == listing(src) and sums(tmp_path / "copy") == sums(src)
    assert data["tree"]["file"] == 3000 and data["tree"]["dir"] == 7
    # packed into bundles: far fewer chunks than files, each a whole number of files
    assert data["moved_bytes"] == data["bytes"] < 3000 * data["chunk_bytes"] // 16


@needs_root
def test_a_half_sent_tree_of_small_files_resumes_with_only_what_did_not_arrive(fed, tmp_path):
    src, dst = make_small_files(tmp_path / "set", 4000, 64_000), tmp_path / "copy"
    proc = subprocess.Popen([GEOFED, "transfer", "-f", str(fed.path), f"A1:{src}", f"B1:{dst}", "--streams", "1",
                             "--chunk-mb", "1"], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while sum(len(files) for _, _, files in os.walk(dst)) < 300:  # some files have arrived
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    for pid in _ends(tmp_path):
        os.kill(pid, signal.SIGKILL)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # what arrived has its size and mtime (the quick check holds it); the rest is sent again
    def files(root: Path) -> dict[str, tuple[int, str]]:
        return {f[0]: (int(f[4]), f[5]) for f in map(str.split, listing(root)) if f[1] == "f"}
    theirs = files(src)
    done = sum(size for path, (size, mtime) in files(dst).items() if theirs[path] == (size, mtime))
    assert 0 < done < sum(size for size, _ in theirs.values()) / 2
    data = transfer.run(fed, f"A1:{src}", f"B1:{dst}", streams=1, chunk=1 << 20)
    assert listing(dst) == listing(src) and sums(dst) == sums(src)
    assert data["held_bytes"] == done and data["moved_bytes"] == data["bytes"] - done
    assert not list(dst.rglob("*" + xfer_ends.PARTIAL + "*"))


def started(fed, src: Path, dst: Path, manifest: Path) -> subprocess.Popen:
    """`geofed transfer SRC DST` over one stream in 1 MiB chunks, returned once the receiver
    has verified 5 chunks of the file whose manifest is given."""
    proc = subprocess.Popen([GEOFED, "transfer", "-f", str(fed.path), f"A1:{src}", f"B1:{dst}", "--streams", "1",
                             "--chunk-mb", "1"], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(verified(manifest)) < 5:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    return proc


def verified(manifest: Path) -> list[str]:
    """The chunks a receiver has verified so far ("offset digest" lines after the line naming the source)."""
    return manifest.read_text().splitlines()[1:] if manifest.exists() else []


def _ends(under: Path, which: str = "") -> list[int]:
    """Pids of running transfer ends of this test's transfer (a path of theirs is under its
    directory: other transfers on the host are not this test's to kill), or of one kind
    ("recv", "send"): they live in the nodes' namespaces, outside the command's process group."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"geofed.ops.xfer_ends" in cmd and (not which or which.encode() in cmd) and \
                    any(arg.startswith(str(under).encode()) for arg in cmd):
                out.append(int(d))
    return out


@needs_root
def test_a_wrong_secret_is_refused(fed, tmp_path):
    plan = core.require_up(fed)
    b1 = plan.node("B1")
    rx = transfer.End(transfer.end_argv(plan, "B1", ["recv", "--bind", b1.address, "--dest", str(tmp_path / "x"),
                                                     "--timeout", "20"], None, None), dict(os.environ),
                      os.urandom(32), over_ssh=False)
    try:
        port = rx.wait_for("listening", 20)["port"]
        tx = subprocess.run(transfer.end_argv(plan, "A1", [
            "send", "--connect", f"{b1.address}:{port}", "--source", "mem:1000", "--streams", "1"], None, None),
            env=dict(os.environ, GEOFED_XFER_SECRET=os.urandom(32).hex()), capture_output=True, text=True, timeout=30)
        assert tx.returncode == 3
        assert json.loads(tx.stdout.splitlines()[-1])["message"].startswith("the other end")
        assert rx.wait_for("refused", 10)["event"] == "refused"
        assert not (tmp_path / "x").exists()
    finally:
        rx.stop()


@needs_root
def test_memory_to_dev_null_moves_and_keeps_nothing(fed, tmp_path):
    data = transfer.run(fed, "A1:mem:20M", "B1:/dev/null", streams=2)
    assert data["moved_bytes"] == 20 << 20 and data["rate_mbps"] > 0
    assert data["sender_cpu_s_per_gb"] > 0 and data["receiver_cpu_s_per_gb"] > 0


@needs_root
@pytest.mark.parametrize("src,dst,message", [
    ("A1:/no/such/file", "B1:/tmp/x", "source /no/such/file: no such file or directory"),
    ("Z9:/etc/hostname", "B1:/tmp/x", "has no node Z9"),
    ("A1:/etc/hostname", "B1", "expected NODE:PATH"),
    ("A1:mem:lots", "B1:/dev/null", "'lots' is not a size"),
    ("A1:/etc/hostname", "B1:/no/such/dir/x", "directory /no/such/dir does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(fed, src, dst, message):
    res = run_geofed("transfer", "-f", str(fed.path), src, dst)
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


@needs_root
def test_no_space_at_the_destination_is_refused_before_anything_moves(fed, tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "geofed-xfer-test", str(small)], check=True)
    try:
        src = make(tmp_path / "two.bin", 2 << 20)
        with pytest.raises(UserError, match="no space"):
            transfer.run(fed, f"A1:{src}", f"B1:{small / 'two.bin'}")
        assert list(small.iterdir()) == []
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_streams_buffers_and_congestion_follow_the_link(write_fed, tmp_path):
    fed = federation.load(write_fed(two_site_federation("xfer-choose", rtt_ms=9.0, gbps=4.0)))
    c = transfer.choose(fed, "A", "B")
    assert c.bdp == pytest.approx(4.5e6, rel=0.01)
    assert (c.streams, c.buffer, c.congestion) == (2, c.bdp, "cubic")
    # the sender measures, after slow start, whether the path loses and holds them below 80 % of the link
    assert (c.switch_above, c.switch_below_Bps) == (transfer.MIN_SWITCH_LOSS, 0.8 * 4e9 / 8)
    given = transfer.choose(fed, "A", "B", 2, 0)
    assert (given.streams, given.buffer, given.bdp) == (2, 0, c.bdp)
    (tmp_path / "d").mkdir()
    lossy = federation.load(federation.derive(fed, tmp_path / "d", "xfer-lossy", loss=0.01))
    # 8 cubic streams at 1 % make 126 Mb/s of the 4000: bbr, as many streams as the BDP asks, autotuned buffers
    c = transfer.choose(lossy, "A", "B")
    assert (c.streams, c.buffer, c.congestion, c.switch_above, c.switch_below_Bps) == (2, 0, "bbr", 0.0, 0.0)
    assert "126 Mb/s of 4000" in c.reason
    asked = transfer.choose(lossy, "A", "B", congestion="cubic")
    assert (asked.streams, asked.congestion) == (transfer.MAX_STREAMS, "cubic")  # 15 Mb/s a stream
    assert asked.reason == "asked (--congestion cubic)"


def test_the_narrower_end_is_the_busiest_part():
    fed = federation.load("icm-task")
    run = {"seconds": 10.0, "bytes": 1.25e9, "streams": 2, "send_s": 4.0}  # 1000 Mb/s of 3826
    idle = {"read_s": 1.0, "cpu_s": 2.0}
    got = {"written_s": 2.0, "streams": 2, "cpu_s": 3.0, "waited_s": 12.0}
    lim = transfer.narrower_end(fed, "W", "G", run | idle, got)
    assert lim["narrower"] == "network"  # nobody busy
    assert lim["waiting"] == {"sender sending": 0.2, "receiver waiting": 0.6}
    lim = transfer.narrower_end(fed, "W", "G", run | idle, got | {"written_s": 18.0})
    assert lim["narrower"] == "receiver disk" and lim["busy"]["receiver disk"] == 0.9
    assert transfer.narrower_end(fed, "W", "G", run | idle | {"cpu_s": 9.5}, got)["narrower"] == "sender CPU"
    fast = run | idle | {"bytes": 4.5e9}  # 3600 Mb/s, 94 % of the goodput: the network, though the sender reads 90 %
    assert transfer.narrower_end(fed, "W", "G", fast | {"read_s": 18.0}, got)["narrower"] == "network"


def measured(mbps, streams=2, *, tx_cpu, rx_cpu, sending, waiting, window, behind, tx_ready, rx_ready,
             written=0.0):
    """The ends' done events of a 10 s data phase with these shares (the shares the ends measured
    on a 50 ms, 10 Gb/s copy of icm-task, docs/transfer.md)."""
    n, wall = streams, 10.0
    nbytes = mbps * 1e6 / 8 * wall
    sent = {"seconds": wall, "bytes": nbytes, "streams": n, "read_s": 0.0, "cpu_s": tx_cpu * wall,
            "send_s": sending * n * wall, "cpu_waited_s": tx_ready * n * wall, "busy_s": n * wall,
            "rwnd_limited_s": window * n * wall, "sndbuf_limited_s": 0.0}
    got = {"bytes": nbytes, "streams": n, "written_s": written * n * wall, "cpu_s": rx_cpu * wall,
           "waited_s": waiting * n * wall, "cpu_waited_s": rx_ready * n * wall, "queued": behind * nbytes}
    return sent, got


def test_an_end_starved_of_cpu_is_named_though_its_cpu_seconds_are_few(tmp_path):
    """Before, every run on this 2-core host was named "network", also where the receiver, on
    CPU a third of the time, held geofed to 0.75 of iperf3. The cases the ends measured:"""
    fed = federation.load(federation.derive(federation.load("icm-task"), tmp_path, "xfer-50ms", rtt_ms=50,
                                            bandwidth_gbps=10))

    def named(**shares):
        return transfer.narrower_end(fed, "W", "G", *measured(**shares))

    # alone on the host at 0.99 of iperf3: its streams waited for bytes more than for a CPU
    quiet = named(mbps=4859, tx_cpu=0.111, rx_cpu=0.411, sending=0.925, waiting=0.665, window=0.003, behind=0.649,
                  tx_ready=0.129, rx_ready=0.348)
    assert quiet["narrower"] == "network" and quiet["network"] == pytest.approx(0.907, abs=1e-3)
    # the receiver in a cgroup of a quarter of a CPU: 4222 Mb/s, its streams ready to run 71 % of the time;
    # again 4040 Mb/s, 62 %
    starved = named(mbps=4222, tx_cpu=0.109, rx_cpu=0.238, sending=0.905, waiting=0.452, window=0.188, behind=0.984,
                    tx_ready=0.069, rx_ready=0.713)
    assert starved["narrower"] == "receiver CPU" and starved["waiting_for_cpu"]["receiver"] == 0.713
    assert named(mbps=4040, tx_cpu=0.084, rx_cpu=0.224, sending=0.933, waiting=0.613, window=0.135, behind=0.908,
                 tx_ready=0.047, rx_ready=0.615)["narrower"] == "receiver CPU"
    assert "streams waiting for a CPU: sender 7%, receiver 71%" in transfer.limit_line(
        {"congestion": {"algorithm": "cubic", "sockets": ["cubic"], "reason": "", "retransmitted": 0.0},
         "limit": starved})
    # the sender in one of a 25th of a CPU, twice: 1833 and 2338 Mb/s (its streams, woken in sendall and
    # waiting for a CPU, count as blocked sending too)
    for sender in (named(mbps=1833, tx_cpu=0.049, rx_cpu=0.149, sending=0.874, waiting=0.892, window=0.0,
                         behind=0.562, tx_ready=0.929, rx_ready=0.092),
                   named(mbps=2338, tx_cpu=0.051, rx_cpu=0.17, sending=0.89, waiting=0.864, window=0.0,
                         behind=0.497, tx_ready=0.876, rx_ready=0.106)):
        assert sender["narrower"] == "sender CPU"
    # two busy loops beside both ends: the host's CPU, shared, held geofed (4809 Mb/s) and iperf3 (4766) alike
    hogs = named(mbps=4809, tx_cpu=0.121, rx_cpu=0.427, sending=0.937, waiting=0.435, window=0.127, behind=0.989,
                 tx_ready=0.127, rx_ready=0.665)
    assert hogs["narrower"] == "receiver CPU"
    # a receiver whose window held the sender most of its sending time: its CPU, or its disk if writing
    held = dict(mbps=3000, tx_cpu=0.1, rx_cpu=0.3, sending=0.95, waiting=0.1, window=0.75, behind=0.9,
                tx_ready=0.05, rx_ready=0.05)
    assert named(**held)["narrower"] == "receiver CPU" and named(**held)["receiver_window"] == 0.75
    assert named(**held | {"written": 0.7})["narrower"] == "receiver disk"


def test_every_stream_gets_sixteen_chunks_to_share_unless_that_goes_below_256_kib():
    assert xfer_ends.chunk_for(1 << 30, 8) == 8 << 20
    assert xfer_ends.chunk_for(64 << 20, 8) == 512 << 10  # 128 chunks for 8 streams
    assert xfer_ends.chunk_for(64 << 20, 1) == 4 << 20
    assert xfer_ends.chunk_for(1 << 20, 8) == 256 << 10


def test_report_shows_transfers_and_the_benchmark(tmp_path):
    from geofed import records, report
    link = {"src_site": "W", "dst_site": "G", "rtt_ms": 9.004, "bandwidth_gbps": 4.0, "bdp_bytes": 4502000}
    one = {"source": "W1:/d", "destination": "G1:/e", "bytes": 10 ** 9, "moved_bytes": 6 * 10 ** 8,
           "held_bytes": 4 * 10 ** 8, "seconds": 1.5, "rate_mbps": 3200.0, "streams": 2, "buffer_bytes": 4502000,
           "chunk_bytes": 8 << 20, "resent_chunks": 1, "corrupt_found": 1, "sender_cpu_s_per_gb": 0.41,
           "receiver_cpu_s_per_gb": 0.77, "link": link,
           "tree": {"file": 1, "dir": 0, "link": 0, "hardlink": 0, "deleted": 0, "not_sent": 0}}
    row = {"loss": 0.0, "streams": 2, "bytes": 10 ** 9, "repeat": 3, "geofed_mbps": 3623.0, "iperf3_mbps": 3707.0,
           "geofed_sender_cpu_s_per_gb": 0.41, "iperf3_sender_cpu_s_per_gb": 0.17}
    row |= {"gridftp_mbps": 3724.0, "xrootd_mbps": 2255.0}
    bench = {"link": {"rtt_ms": 9.004, "bandwidth_gbps": 4.0}, "auto_streams": 2, "peers": ["gridftp", "xrootd"],
             "rows": [row, dict(row, streams=4, geofed_mbps=3554.0, iperf3_mbps=3725.0)]}
    page = report.render([records.make("ops.transfer", one), records.make("bench.transfer", bench)],
                         tmp_path).read_text()
    assert "G1:/e" in page and "80.0%" in page and "0.41 / 0.77" in page
    assert "0.977" in page and "2255" in page and (tmp_path / "transfer-0.png").stat().st_size > 1000


def test_bench_transfer_names_an_unknown_peer():
    res = run_geofed("bench", "transfer", "--peers", "gridftp,bbcp")
    assert res.returncode == 2 and "--peers: unknown 'bbcp'" in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("size,message", [("100-1", "the largest size is below the smallest"),
                                          ("lots", "'lots' is not a size")])
def test_bench_transfer_files_names_a_bad_file_size(write_fed, size, message):
    fed = write_fed(two_site_federation("xfer-files", rtt_ms=9.0, gbps=4.0))
    res = run_geofed("bench", "transfer-files", "-f", str(fed), "--file-size", size)
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
