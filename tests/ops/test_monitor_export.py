"""`geofed monitor export` and `monitor dashboard`: a real Prometheus (Debian's) scrapes
the OpenMetrics endpoint and its query API returns each path's series; the dashboard
holds the grid of paths by status and a plot per series."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import GEOFED, pixels_of, run_geofed, screenshot, two_site_federation, wait_until
from geofed import federation
from geofed.ops import judge, monitor_dashboard
from geofed.ops.monitor_store import Sample, Store

SITES = ("A1-B1", "A2-B1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def monitored_store(tmp_path: Path, name: str) -> tuple[Path, object]:
    """A store as `monitor serve` leaves it: A1-B1 healthy at its 1 ms model, A2-B1's
    delay stepped up to 1.6 ms (degraded against its reference and the model), an event."""
    fed_file = tmp_path / f"{name}.toml"
    fed_file.write_text(two_site_federation(name, rtt_ms=2.0))
    fed = federation.load(fed_file)
    st = judge.Settings(reference_samples=5)
    store_path = tmp_path / "m.sqlite"
    store = Store(store_path)
    store.set_meta("federation", str(fed_file))
    store.set_meta("judge", asdict(st))
    t0 = time.time() - 30
    for i in range(30):
        for path in SITES:
            a, b = path.split("-")
            stepped = path == "A2-B1" and i >= 20
            for src, dst in ((a, b), (b, a)):
                owd = (1.6 if stepped else 1.02) + 0.002 * (i % 3)
                store.add(Sample(t0 + i, path, src, dst, "owd_ms", owd, 0.0))
                store.add(Sample(t0 + i, path, src, dst, "loss", 0.0))
        if i % 10 == 0:
            store.add(Sample(t0 + i, "A1-B1", "A1", "B1", "latency_us", 1004.0 + i))
            store.add(Sample(t0 + i, "A1-B1", "A1", "B1", "bw_MBps", 105.0 - i / 10))
    judge.learn(store, st, "A1-B1")
    judge.learn(store, st, "A2-B1")
    store.write("INSERT INTO events (path, state, reason, opened, alerted) VALUES (?,?,?,?,1)",
                ("A2-B1", "degraded", "owd_ms A2>B1 1.6 ms vs reference 1.02 ms (+57 %)", t0 + 20))
    store.close()
    return store_path, fed


def test_the_endpoint_serves_openmetrics_of_every_path(tmp_path):
    store_path, fed = monitored_store(tmp_path, "gfexp-text")
    from geofed.ops import monitor_export
    store, fed, st = judge.open_store(str(store_path))
    text = monitor_export.exposition(store, fed, st, time.time())
    store.close()
    assert text.endswith("# EOF\n")
    assert 'geofed_path_status{federation="gfexp-text",a="A1",b="B1"} 0' in text
    assert 'geofed_path_status{federation="gfexp-text",a="A2",b="B1"} 1' in text
    assert ('geofed_path_model{federation="gfexp-text",a="A1",b="B1",direction="A1>B1",metric="owd_ms"} 1.0'
            in text)
    assert 'metric="latency_us"} 1024.0' in text and 'metric="bw_MBps"} 103.0' in text


def test_bad_listen_address_is_one_line(tmp_path):
    store_path, _ = monitored_store(tmp_path, "gfexp-bad")
    res = run_geofed("monitor", "export", str(store_path), "--listen", "nowhere")
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "--listen 'nowhere': expected HOST:PORT" in res.stderr
    res = run_geofed("monitor", "export", str(tmp_path / "none.sqlite"))
    assert res.returncode == 2 and "no such monitoring store" in res.stderr


def query(prom: str, expr: str) -> list[dict]:
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)["data"]["result"]
    except OSError:
        return []  # not up yet


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs Debian's prometheus package (setup.sh)")
def test_prometheus_scrapes_the_endpoint_and_returns_the_series(tmp_path):
    store_path, _ = monitored_store(tmp_path, "gfexp-prom")
    export_port, prom_port = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(f"""
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: geofed-monitor
    static_configs:
      - targets: ["127.0.0.1:{export_port}"]
""")
    children = []
    try:
        children.append(subprocess.Popen([GEOFED, "monitor", "export", str(store_path), "--listen",
                                          f"127.0.0.1:{export_port}"], stdout=subprocess.PIPE, text=True))
        assert "as OpenMetrics at" in children[0].stdout.readline()
        children.append(subprocess.Popen(
            ["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w")))
        prom = f"http://127.0.0.1:{prom_port}"
        owd = wait_until(lambda: query(prom, 'geofed_path_value{metric="owd_ms"}'), 60,
                         "Prometheus returns the scraped one-way delays")
        got = {(s["metric"]["a"], s["metric"]["b"], s["metric"]["direction"]): float(s["value"][1]) for s in owd}
        assert got == {("A1", "B1", "A1>B1"): pytest.approx(1.024), ("A1", "B1", "B1>A1"): pytest.approx(1.024),
                       ("A2", "B1", "A2>B1"): pytest.approx(1.604), ("A2", "B1", "B1>A2"): pytest.approx(1.604)}
        assert all(s["metric"]["federation"] == "gfexp-prom" for s in owd)
        status = {s["metric"]["a"]: float(s["value"][1]) for s in query(prom, "geofed_path_status")}
        assert status == {"A1": 0.0, "A2": 1.0}
        (ref,) = query(prom, 'geofed_path_reference{a="A2",direction="A2>B1",metric="owd_ms"}')
        assert float(ref["value"][1]) == pytest.approx(1.022)
        (model,) = query(prom, 'geofed_path_model{a="A1",direction="A1>B1",metric="latency_us"}')
        assert float(model["value"][1]) == pytest.approx(1000.0)
    finally:
        for child in reversed(children):
            child.terminate()
            child.wait(timeout=30)


class Elements(HTMLParser):
    """The grid cells (src, dst) -> state and the embedded plots of a dashboard."""

    def __init__(self):
        super().__init__()
        self.cells: dict[tuple[str, str], str] = {}
        self.plots: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td" and "data-state" in a:
            self.cells[(a["data-src"], a["data-dst"])] = a["data-state"]
        if tag == "img" and a.get("src", "").startswith("data:image/png;base64,"):
            self.plots.append(a["alt"])


def dashboard_of(tmp_path: Path) -> Path:
    store_path, _ = monitored_store(tmp_path, "gfexp-dash")
    res = run_geofed("monitor", "dashboard", str(store_path), "--out", str(tmp_path / "dash"))
    assert res.returncode == 0, res.stderr
    return Path(res.stdout.strip())


def test_the_dashboard_has_the_grid_by_status_and_a_plot_per_series(tmp_path):
    index = dashboard_of(tmp_path)
    page = Elements()
    page.feed(index.read_text())
    monitored = {k: v for k, v in page.cells.items() if v != "none"}  # the rest is grey: not monitored
    assert monitored == {("A1", "B1"): "ok", ("B1", "A1"): "ok", ("A2", "B1"): "degraded", ("B1", "A2"): "degraded"}
    assert len(page.plots) == 10 and "A1-B1 A1>B1 latency_us" in page.plots
    assert not list(index.parent.glob("*.png"))  # self-contained: the plots are in the page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium package (setup.sh)")
def test_a_screenshot_of_the_dashboard_shows_the_grid_coloured_by_status(tmp_path):
    image = screenshot(dashboard_of(tmp_path), tmp_path / "dashboard.png")
    ok, degraded = pixels_of(image, monitor_dashboard.COLOURS["ok"]), pixels_of(image, monitor_dashboard.COLOURS["degraded"])
    assert ok > 3000 and degraded > 3000, (ok, degraded)  # two cells of each, and each path's state
    assert pixels_of(image, monitor_dashboard.COLOURS["down"]) == 0
