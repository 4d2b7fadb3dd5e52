"""The report's overview: the federation drawn with its sites and links, each link's
verdict with its reason, headline figures beside the seeds'; `geofed report` over a
directory tree or single files, and its errors in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import GEOFED, pixels_of, run_geofed, screenshot
from record_samples import sample

from geofed import records

THREE_SITES = """
name = "gfrep-three"
description = "three sites, three links"
[[site]]
code = "M"
name = "Mannheim"
nodes = 2
[[site]]
code = "F"
name = "Frankfurt"
nodes = 1
[[site]]
code = "S"
name = "Stuttgart"
nodes = 1
[[link]]
sites = ["M", "F"]
rtt_ms = 2.0
bandwidth_gbps = 1.0
[[link]]
sites = ["M", "S"]
rtt_ms = 5.0
bandwidth_gbps = 1.0
[[link]]
sites = ["F", "S"]
rtt_ms = 12.0
bandwidth_gbps = 0.5
"""


def verify_pair(src, dst, configured, median, ok=True):
    return {"src": src, "dst": dst, "class": "inter-site",
            "rtt_ms": {"configured": configured, "min": median, "median": median, "p99": median, "samples": 200,
                       "lost": 0, "ok": ok},
            "throughput_mbps": {"configured": 1000.0, "measured": 941.0, "streams": 4, "ok": True},
            "host_cpu_ms_per_MB": 4.0}


def check_row(scope, pair, link, measured, value, ok):
    return {"system": "gfrep-three", "scope": scope, "benchmark": "latency", "size": 1, "value": value,
            "lower": -0.1, "upper": 0.1, "run": "r.json", "pair": pair, "link": link, "measured": measured,
            "low": value * 0.9, "high": value * 1.1, "deviation": measured / value - 1, "ok": ok,
            "status": "ok" if ok else "too high"}


def write_records(tmp_path: Path) -> Path:
    """A tree as a user's runs leave it: geofed-out/ with the parts' directories."""
    fed_file = tmp_path / "gfrep-three.toml"
    fed_file.write_text(THREE_SITES)
    meta = {"federation": "gfrep-three", "federation_file": str(fed_file), "federation_sha256": "0" * 64}
    out = tmp_path / "work" / "geofed-out"
    verify = records.make("testbed.verify", {"pairs": [verify_pair("M1", "F1", 2.004, 2.02),
                                                       verify_pair("M1", "S1", 5.004, 5.03),
                                                       verify_pair("F1", "S1", 12.004, 12.1)],
                                             "host_cores": 2, "ok": True}, **meta)
    records.save(verify, out / "testbed")
    rows = [check_row("M-F", "M1-F1", "F-M", 1010.0, 1000.0, True),
            check_row("M-S", "M1-S1", "M-S", 2520.0, 2500.0, True),
            check_row("F-S", "F1-S1", "F-S", 9700.0, 6000.0, False)]
    records.save(records.make("bench.check", {"references": "refs.toml", "rows": rows}), out / "bench")
    matrix = sample("bench.matrix", nodes=["M1", "F1"], pairs=[
        {"a": "M1", "b": "F1", "class": "inter-site", "latency_us": 1012.0, "latency_min_us": 1008.0,
         "bw_MBps": 102.0, "iterations": [100, 20], "wrong": 0, "model": None, "model_latency_us": 1000.0,
         "model_bw_MBps": 110.0}])
    records.save(records.make("bench.matrix", matrix, **meta), out / "bench")
    return out


class Page(HTMLParser):
    """The overview's figure and its verdict table's rows."""

    def __init__(self):
        super().__init__()
        self.images, self.rows, self._row, self._cell = [], [], None, None
        self.in_overview = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and a.get("id") == "overview":
            self.in_overview = True
        if self.in_overview and tag == "img":
            self.images.append(a["src"])
        if self.in_overview and tag == "tr":
            self._row = []
        if self._row is not None and tag == "td":
            self._cell = ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row.append(self._cell)
            self._cell = None
        if tag == "tr" and self._row:
            self.rows.append(self._row)
            self._row = None
        if tag == "section":
            self.in_overview = False


def test_the_overview_comes_first_with_the_federation_and_each_links_verdict(tmp_path):
    write_records(tmp_path)
    res = run_geofed("report", str(tmp_path / "work"), "--out", str(tmp_path / "page"))
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "page" / "report.html").read_text()
    assert text.index("<h2>Overview</h2>") < text.index("Testbed verification")
    page = Page()
    page.feed(text)
    (drawing,) = page.images
    assert (tmp_path / "page" / drawing).stat().st_size > 10_000
    verdicts = {row[0]: (row[1], row[2]) for row in page.rows if len(row) == 3}
    assert set(verdicts) == {"M–F", "M–S", "F–S"}
    assert verdicts["M–F"][0] == verdicts["M–S"][0] == "ok"
    assert verdicts["F–S"][0] == "FAIL"
    assert "latency 1 B on F1-S1: 9700 vs reference 6000 (+62 %, too high)" in verdicts["F–S"][1]
    figures = {(row[0], row[1]): row[2:4] for row in page.rows if len(row) == 4}  # no seed measured gfrep-three
    assert figures[("M–F", "MPI latency, 1 B [us]")] == ["1012", "1000"]
    assert figures[("F–S", "RTT [ms]")] == ["12.1", "12"]


def test_a_single_record_file_is_a_report_and_shipped_seed_figures_stand_beside(tmp_path):
    rec = records.make("testbed.verify", {"pairs": [verify_pair("W1", "G1", 9.004, 9.03)], "host_cores": 2, "ok": True},
                       federation="icm-task")
    path = records.save(rec, tmp_path / "one")
    res = run_geofed("report", str(path), "--out", str(tmp_path / "page"))
    assert res.returncode == 0, res.stderr
    page = Page()
    page.feed((tmp_path / "page" / "report.html").read_text())
    row = next(r for r in page.rows if len(r) == 6)
    assert row[:5] == ["W–G", "RTT [ms]", "9.03", "9.004", "9"] and row[5].startswith("seed 000")


def test_report_errors_are_one_line(tmp_path):
    res = run_geofed("report", str(tmp_path / "nowhere"))
    assert res.returncode == 2 and res.stderr.strip() == f"geofed: error: {tmp_path / 'nowhere'}: no such file or directory"
    (tmp_path / "empty").mkdir()
    res = run_geofed("report", str(tmp_path / "empty"))
    assert res.returncode == 2 and "no geofed record in" in res.stderr and res.stderr.count("\n") == 1


def as_nobody(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", GEOFED, *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(home)})


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become another user")
def test_a_folder_a_normal_user_cannot_write_or_enter_is_one_line(tmp_path):
    top = Path(tempfile.mkdtemp(prefix="geofed-test-report-"))  # pytest's own tree is root's alone
    try:
        top.chmod(0o755)
        write_records(top)
        for p in top.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        home = top / "home"  # the user's own, where matplotlib keeps its cache
        home.mkdir()
        os.chown(home, 65534, 65534)
        res = as_nobody("report", str(top / "work"), home=home)
        assert res.returncode == 2, res.stderr
        assert res.stderr.count("\n") == 1 and "cannot write the report there (Permission denied)" in res.stderr
        assert not list((top / "work").glob("report.html"))
        res = as_nobody("report", str(tmp_path), home=home)
        assert res.returncode == 2 and res.stderr.count("\n") == 1
        assert f"{tmp_path}: cannot read: Permission denied" in res.stderr
    finally:
        shutil.rmtree(top)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium package (setup.sh)")
def test_a_screenshot_of_the_overview_shows_the_links_by_verdict(tmp_path):
    write_records(tmp_path)
    assert run_geofed("report", str(tmp_path / "work"), "--out", str(tmp_path / "page")).returncode == 0
    image = screenshot(tmp_path / "page" / "report.html", tmp_path / "overview.png", width=1200, height=1000)
    failed, passed, sites = (pixels_of(image, c) for c in ("#d62728", "#2ca02c", "#1f77b4"))  # tab: red, green, blue
    assert failed > 300 and passed > 2 * failed and sites > 3000, (failed, passed, sites)  # F-S; M-F, M-S; 3 sites
    assert pixels_of(image, "#ffdddd") > 5000  # the failed link's row in the verdict table
