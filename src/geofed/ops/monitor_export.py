"""`geofed monitor export STORE --listen HOST:PORT`: the store of `monitor serve` as an
OpenMetrics text endpoint, what a centre's Prometheus scrapes and its Grafana shows.

Every scrape reads the store afresh (a read transaction sees every committed sample)
and judges each path as `monitor status` does. Gauges, labelled with the federation,
the path's nodes `a` and `b`, the `direction` (`A1>B1`) and the `metric` (owd_ms,
loss, latency_us, bw_MBps, throughput_Mbps: the unit is in the name):
- `geofed_path_status`: 0 ok, 1 degraded, 2 down (labels federation, a, b);
- `geofed_path_value`: the newest sample judged (NaN when its test failed);
- `geofed_path_model`: what the link model says; `geofed_path_reference`: the
  path's own learnt level, `geofed_path_reference_spread` its noise;
- `geofed_path_sample_time_seconds`: when the newest sample was taken.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from geofed.errors import UserError
from geofed.ops import judge
from geofed.ops.monitor_store import Store

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
STATUS_CODE = {state: i for i, state in enumerate(judge.STATES)}
GAUGES = {
    "geofed_path_status": "the path's state: 0 ok, 1 degraded, 2 down",
    "geofed_path_value": "the newest sample of a series judged (NaN: its test failed)",
    "geofed_path_model": "the link model's value of the series",
    "geofed_path_reference": "the path's own reference level of the series",
    "geofed_path_reference_spread": "the noise of the series' reference",
    "geofed_path_sample_time_seconds": "Unix time of the newest sample of the series",
}


@dataclass(frozen=True)
class Series:
    """One series' newest state: what the export and the dashboard show."""
    path: str
    src: str
    dst: str
    metric: str
    t: float
    value: float | None
    model: float | None
    reference: tuple[float, float] | None

    @property
    def direction(self) -> str:
        return f"{self.src}>{self.dst}"


def path_nodes(path: str) -> tuple[str, str]:
    a, _, b = path.partition("-")
    return a, b


def series_now(store: Store, fed, st: judge.Settings) -> list[Series]:
    """The newest judged sample of every series, with its model and reference."""
    out = []
    for path, src, dst, metric in store.series_keys():
        newest = store.latest(path, src, dst, metric, 1)
        if not newest:
            continue  # only samples taken while another test ran on the path: not judged
        out.append(Series(path, src, dst, metric, newest[-1].t, newest[-1].value,
                          judge.model(fed, metric, src, dst, st.bw_bytes),
                          judge.reference(store, st, path, src, dst, metric)))
    return out


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name: str, labels: dict, value: float | None) -> str:
    text = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
    return f"{name}{{{text}}} {'NaN' if value is None or math.isnan(value) else repr(float(value))}"


def exposition(store: Store, fed, st: judge.Settings, now: float) -> str:
    """The OpenMetrics text of a store's paths and series at `now`."""
    lines: dict[str, list[str]] = {name: [] for name in GAUGES}
    for path, state, _ in judge.status(store, fed, st, now):
        a, b = path_nodes(path)
        lines["geofed_path_status"].append(
            _sample("geofed_path_status", {"federation": fed.name, "a": a, "b": b}, STATUS_CODE[state]))
    for s in series_now(store, fed, st):
        a, b = path_nodes(s.path)
        labels = {"federation": fed.name, "a": a, "b": b, "direction": s.direction, "metric": s.metric}
        lines["geofed_path_value"].append(_sample("geofed_path_value", labels, s.value))
        lines["geofed_path_sample_time_seconds"].append(_sample("geofed_path_sample_time_seconds", labels, s.t))
        if s.model is not None:
            lines["geofed_path_model"].append(_sample("geofed_path_model", labels, s.model))
        if s.reference is not None:
            lines["geofed_path_reference"].append(_sample("geofed_path_reference", labels, s.reference[0]))
            lines["geofed_path_reference_spread"].append(
                _sample("geofed_path_reference_spread", labels, s.reference[1]))
    out = []
    for name, help_text in GAUGES.items():
        out += [f"# TYPE {name} gauge", f"# HELP {name} {help_text}", *lines[name]]
    return "\n".join(out + ["# EOF"]) + "\n"


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--listen {text!r}: expected HOST:PORT, like 127.0.0.1:9469")
    return host.strip("[]"), int(port)


def make_server(store_path: str, listen: str) -> ThreadingHTTPServer:
    """An HTTP server answering GET /metrics from the store (bound, not yet serving)."""
    store, fed, st = judge.open_store(store_path)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics is here")
                return
            body = exposition(store, fed, st, time.time()).encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass  # a scrape every few seconds would drown the terminal

    host, port = parse_listen(listen)
    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as e:
        store.close()
        raise UserError(f"--listen {listen}: cannot listen there: {e.strerror}") from None
    server.store = store
    return server


def serve(store_path: str, listen: str, log) -> int:
    """Serve until stopped (Ctrl-C, SIGTERM)."""
    server = make_server(store_path, listen)
    host, port = server.server_address[:2]
    log(f"serving {store_path} as OpenMetrics at http://{host}:{port}/metrics")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.store.close()
    return 0
