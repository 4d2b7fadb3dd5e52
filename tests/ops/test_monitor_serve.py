"""`geofed monitor serve` and `monitor status`: the per-path scheduler, retention, the
judgement and its alerts at a real HTTP receiver; on the testbed an injected delay step
alerted and cleared, and a kill -9 that loses no stored sample and resumes the schedule."""

from __future__ import annotations

import json
from dataclasses import asdict
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import GEOFED, needs_root, own_testbed, run_geofed, two_site_federation, wait_until
from geofed import federation
from geofed.ops import alerts, judge
from geofed.ops.monitor_serve import PathScheduler
from geofed.ops.monitor_store import Sample, Store


class Receiver:
    """A webhook receiver on a local port: every POSTed JSON body, in order."""

    def __init__(self):
        self.posts: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.posts.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def whats(self) -> list[str]:
        return [p["what"] for p in self.posts]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


# ---------------------------------------------------------------- the scheduler


def test_two_tests_never_hold_one_path_at_once_but_other_paths_go_on():
    sched = PathScheduler()
    first_in, second_tried, other_in, release = (threading.Event() for _ in range(4))
    order = []

    def first():
        with sched.holding({"W1-G1"}, "throughput"):
            order.append("first in")
            first_in.set()
            assert release.wait(30)
            order.append("first out")

    def second():
        assert first_in.wait(30)
        second_tried.set()
        with sched.holding({"W1-G1", "sink@G1"}, "mpi"):
            order.append("second in")

    def other():
        assert first_in.wait(30)
        with sched.holding({"W2-G2"}, "mpi"):
            other_in.set()  # while the first still holds W1-G1

    threads = [threading.Thread(target=f) for f in (first, second, other)]
    for t in threads:
        t.start()
    assert other_in.wait(30) and second_tried.wait(30)
    assert "second in" not in order
    release.set()
    for t in threads:
        t.join(30)
    assert order == ["first in", "first out", "second in"]
    t_now = time.time()
    assert sched.held("W1-G1", t_now - 60, t_now) == ["mpi", "throughput"]
    assert sched.held("W3-G3", t_now - 60, t_now) == []


# ---------------------------------------------------------------- the store


def test_retention_folds_old_samples_into_interval_aggregates(tmp_path):
    store = Store(tmp_path / "m.sqlite")
    for i in range(10):  # 10 samples at 0..90 s, one failed
        store.add(Sample(1000.0 + 10 * i, "A1-B1", "A1", "B1", "owd_ms", None if i == 3 else float(i),
                         error="none arrived" if i == 3 else None))
    assert store.fold(before=1050.0, seconds=60.0) == 5  # 1000..1040 are older
    assert store.fold(before=1070.0, seconds=60.0) == 2  # 1050 and 1060 join the interval 1020..1080
    rows = store.rows("SELECT t0, n, errors, min, mean, max FROM aggregates ORDER BY t0")
    assert rows == [(960.0, 2, 0, 0.0, 0.5, 1.0), (1020.0, 4, 1, 2.0, 4.25, 6.0)]
    assert [r[0] for r in store.rows("SELECT value FROM samples ORDER BY t")] == [7.0, 8.0, 9.0]
    store.close()


# ---------------------------------------------------------------- judgement and alerts


def fill(store: Store, t0: float, n: int, value, metric="owd_ms", src="A1", dst="B1") -> float:
    for i in range(n):
        store.add(Sample(t0 + i, "A1-B1", src, dst, metric, value, 0.0))
    return t0 + n


def test_a_path_is_judged_against_model_and_reference_and_alerted_once(tmp_path, receiver):
    fed = federation.load(Path(write_two_site(tmp_path, "gfmon-judge")))
    store = Store(tmp_path / "m.sqlite")
    st = judge.Settings(reference_samples=5, thresholds={"loss": 0.05})
    ch = alerts.Channels(webhook=receiver.url)
    model = judge.model(fed, "owd_ms", "A1", "B1", st.bw_bytes)
    assert model == pytest.approx(1.0)  # half of the 2 ms RTT, the fabrics included
    t = fill(store, time.time() - 20, 6, 1.05)
    assert judge.assess_path(store, st, fed, "A1-B1") == ("ok", "")
    assert store.reference("A1-B1", "A1", "B1", "owd_ms") is None  # judging only reads
    judge.learn(store, st, "A1-B1")
    assert store.reference("A1-B1", "A1", "B1", "owd_ms") == (1.05, 0.0)
    t = fill(store, t, 1, 1.2)  # +14 %: off its reference, within the model's tolerance
    state, reason = judge.assess_path(store, st, fed, "A1-B1")
    assert state == "degraded" and reason == "owd_ms A1>B1 1.2 ms vs reference 1.05 ms (+14 %)"
    alerts.reconcile(store, ch, "gfmon-judge", "A1-B1", state, reason, log=lambda _: None)
    t = fill(store, t, 1, 2.0)  # now beyond the model too: the same event, no second alert
    state, reason = judge.assess_path(store, st, fed, "A1-B1")
    assert "vs model 1 ms (+100 %)" in reason
    alerts.reconcile(store, ch, "gfmon-judge", "A1-B1", state, reason, log=lambda _: None)
    store.add(Sample(t, "A1-B1", "B1", "A1", "owd_ms", None, None, "none of 20 datagrams arrived"))
    state, reason = judge.assess_path(store, st, fed, "A1-B1")
    assert state == "down" and "owd_ms B1>A1: none of 20 datagrams arrived" in reason
    store.close()

    store = Store(tmp_path / "m.sqlite")  # a restarted service: the event is remembered
    alerts.reconcile(store, ch, "gfmon-judge", "A1-B1", state, reason, log=lambda _: None)
    fill(store, t + 1, 1, 1.06, src="B1", dst="A1")
    t = fill(store, t + 1, 1, 1.06)
    assert judge.assess_path(store, st, fed, "A1-B1") == ("ok", "")
    alerts.reconcile(store, ch, "gfmon-judge", "A1-B1", "ok", "", log=lambda _: None)
    alerts.reconcile(store, ch, "gfmon-judge", "A1-B1", "ok", "", log=lambda _: None)
    assert receiver.whats() == ["alert", "clear"]
    assert receiver.posts[0]["state"] == "degraded" and "reference" in receiver.posts[0]["reason"]
    assert receiver.posts[1]["event"] == receiver.posts[0]["event"]

    fill(store, t, 1, 0.2, metric="loss")  # above the schedule's threshold
    state, reason = judge.assess_path(store, st, fed, "A1-B1")
    assert state == "degraded" and "loss A1-B1 20.00 % beyond threshold 5.00 %" in reason
    store.set_meta("federation", str(fed.path))
    store.set_meta("judge", asdict(st))
    store.close()
    res = run_geofed("monitor", "status", str(tmp_path / "m.sqlite"))
    assert res.returncode == 1, res.stderr
    assert re.match(r"A1-B1\s+degraded\s+loss A1-B1 20.00 % beyond threshold", res.stdout)


def test_a_burst_in_one_period_is_a_stall_a_loss_in_two_is_a_rate(tmp_path):
    fed = federation.load(Path(write_two_site(tmp_path, "gfmon-burst")))
    store = Store(tmp_path / "m.sqlite")
    st = judge.Settings(reference_samples=3, probe_datagrams=5000)
    t = fill(store, time.time() - 20, 3, 0.0, metric="loss")
    t = fill(store, t, 1, 5 / 5000, metric="loss")  # 5 lost at once in one period of one direction
    assert judge.assess_path(store, st, fed, "A1-B1") == ("ok", "")
    fill(store, t, 1, 3 / 5000, metric="loss", src="B1", dst="A1")  # and the way back too
    state, reason = judge.assess_path(store, st, fed, "A1-B1")
    assert state == "degraded" and reason.startswith("loss A1-B1 8 of 15000 datagrams (0.053 %) in the newest 2 periods")
    store.close()


def test_one_failed_test_is_a_hiccup_two_in_a_row_are_down(tmp_path):
    fed = federation.load(Path(write_two_site(tmp_path, "gfmon-fails")))
    store = Store(tmp_path / "m.sqlite")
    st = judge.Settings(reference_samples=3)
    t = fill(store, time.time() - 20, 3, 1000.0, metric="latency_us")
    store.add(Sample(t, "A1-B1", "A1", "B1", "latency_us", None, None, "no result within --timeout 30 s"))
    assert judge.assess_path(store, st, fed, "A1-B1") == ("ok", "")  # the level of the tests that ran
    store.add(Sample(t + 1, "A1-B1", "A1", "B1", "latency_us", None, None, "no result within --timeout 30 s"))
    assert judge.assess_path(store, st, fed, "A1-B1") == \
        ("down", "latency_us A1>B1: no result within --timeout 30 s (2 tests in a row)")
    fill(store, t + 2, 1, 1000.0, metric="latency_us")
    assert judge.assess_path(store, st, fed, "A1-B1") == ("ok", "")
    store.close()


def test_an_mpi_latency_is_judged_on_the_share_the_probe_confirms(tmp_path):
    """A loaded host slows MPI's ranks, not the link: with the probe's delay flat, a
    ping-pong 20 % above its reference is the hosts' and the path stays ok; when the
    probe's delay rose by as much meanwhile, the same excess is the link's."""
    fed = federation.load(Path(write_two_site(tmp_path, "gfmon-share")))
    st = judge.Settings(reference_samples=3)

    def judged(probe_after_ms: float, name: str) -> tuple[str, str]:
        store = Store(tmp_path / name)
        t0 = time.time() - 100
        for src, dst in (("A1", "B1"), ("B1", "A1")):
            fill(store, t0, 3, 1.0, src=src, dst=dst)  # the probe's reference: 1 ms one way
            fill(store, t0 + 3, 3, probe_after_ms, src=src, dst=dst)
        t = fill(store, t0, 3, 1100.0, metric="latency_us")
        judge.learn(store, st, "A1-B1")
        fill(store, t, 3, 1320.0, metric="latency_us")  # +220 us
        try:
            return judge.assess_path(store, st, fed, "A1-B1")
        finally:
            store.close()

    assert judged(1.0, "flat.sqlite") == ("ok", "")
    state, reason = judged(1.2, "longer.sqlite")  # the fibre got 200 us longer meanwhile
    assert state == "degraded" and "latency_us A1>B1 1300 us vs reference 1100 us (+18 %)" in reason
    assert "owd_ms A1>B1 1.2 ms vs reference 1 ms (+20 %)" in reason


def test_an_alert_that_cannot_be_sent_is_sent_later_once(tmp_path, receiver):
    store = Store(tmp_path / "m.sqlite")
    dead = alerts.Channels(webhook="http://127.0.0.1:9/nothing-listens")
    said = []
    alerts.reconcile(store, dead, "f", "A1-B1", "down", "gone", log=said.append)
    assert "not delivered, will retry" in said[0]
    ok = alerts.Channels(webhook=receiver.url, command=f"cat >> {tmp_path / 'hook.jsonl'}")
    alerts.reconcile(store, ok, "f", "A1-B1", "down", "gone", log=said.append)
    alerts.reconcile(store, ok, "f", "A1-B1", "down", "gone", log=said.append)
    assert receiver.whats() == ["alert"]
    (line,) = (tmp_path / "hook.jsonl").read_text().splitlines()
    assert json.loads(line)["reason"] == "gone"
    store.close()


def test_mail_goes_through_a_sendmail_compatible_command(tmp_path):
    fake = tmp_path / "sendmail"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/argv\ncat > {tmp_path}/mail\n")
    fake.chmod(0o755)
    failed = alerts.deliver(alerts.Channels(mail_to="noc@example.org", sendmail=str(fake)),
                            {"what": "alert", "federation": "f", "path": "A1-B1", "state": "down", "reason": "gone",
                             "opened": 1.0, "cleared": None, "event": 1})
    assert failed == []
    assert (tmp_path / "argv").read_text().strip() == "-t"
    mail = (tmp_path / "mail").read_text()
    assert "To: noc@example.org" in mail and "Subject: geofed monitor f: A1-B1 down: gone" in mail


# ---------------------------------------------------------------- the command's input


def write_two_site(tmp_path: Path, name: str) -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(two_site_federation(name, rtt_ms=2.0))
    return str(path)


SCHEDULE = """
federation = "{fed}"
store = "m.sqlite"
paths = ["A1-B1"]
[owd]
rate_hz = 20
period_s = {period}
lost_after_s = 0.5
[mpi]
every_s = {mpi_every}
bw_size = "256K"
seconds = 0.3
[throughput]
every_s = {tp_every}
seconds = 1
warmup_s = 0.5
[judge]
reference_samples = 3
reference_tolerance = 0.2
{judge_extra}
[alerts]
webhook = "{webhook}"
"""


@pytest.mark.parametrize("change, error", [
    ("paths = [\"A1-C9\"]", "paths 'A1-C9': expected two different nodes of gfmon-input like W1-G1"),
    ("[owd]\nrate = 5", "[owd].rate: unknown key (known: rate_hz, period_s, size, lost_after_s)"),
    ("[mpi]\nevery_s = \"often\"", "[mpi].every_s: expected a number, got 'often'"),
    ("[judge.thresholds]\ndelay = 3", "[judge.thresholds]: unknown metric 'delay'"),
    ("[mpi]\nrandom = 4", "[mpi] random = 4: gfmon-input has 3 node pairs"),
    ("[judge]\nwindow = 0", "[judge] window, loss_periods, loss_spread and down_after must be at least 1"),
])
def test_a_bad_schedule_is_refused_in_one_line(tmp_path, change, error):
    fed = write_two_site(tmp_path, "gfmon-input")
    text = f'federation = "{fed}"\nstore = "m.sqlite"\n' + \
        ("" if change.startswith("paths") else 'paths = ["A1-B1"]\n') + change + "\n"
    (tmp_path / "s.toml").write_text(text)
    res = run_geofed("monitor", "serve", str(tmp_path / "s.toml"))
    assert res.returncode == 2 and error in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr
    assert not (tmp_path / "m.sqlite").exists()


def test_status_of_a_missing_store_is_refused(tmp_path):
    res = run_geofed("monitor", "status", str(tmp_path / "none.sqlite"))
    assert res.returncode == 2 and "none.sqlite: no such monitoring store" in res.stderr


# ---------------------------------------------------------------- on the testbed


class Serving:
    """`geofed monitor serve` as a user starts it, its output in a log file."""

    def __init__(self, schedule: Path, log: Path):
        self.log = log
        self.proc = subprocess.Popen([GEOFED, "monitor", "serve", str(schedule)], stdout=open(log, "w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text()

    def stored_ids(self) -> set[int]:
        return {int(m) for m in re.findall(r"^stored sample (\d+):", self.text(), re.M)}

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def probes_running(fed_name: str) -> list[int]:
    from geofed.testbed import host
    pids = [p for ns in host.netns_list() if ns.startswith(f"geofed-{fed_name}.") for p in host.netns_pids(ns)]
    out = []
    for p in pids:
        try:
            if b"geofed.ops.owd" in Path(f"/proc/{p}/cmdline").read_bytes():
                out.append(p)
        except FileNotFoundError:
            pass
    return out


def samples(store: Path, where: str = "1") -> list[tuple]:
    db = sqlite3.connect(store)
    try:
        return db.execute(f"SELECT id, t, metric, value, error FROM samples WHERE {where} ORDER BY id").fetchall()
    finally:
        db.close()


def mpi_done(serving: "Serving") -> int:
    return serving.text().count("mpi A1-B1 done")


def references(store: Path) -> set[str]:
    try:
        return {r[2] for r in samples_table(store, "SELECT path, src, metric FROM reference")}
    except sqlite3.OperationalError:  # the service has not made its tables yet
        return set()


def samples_table(store: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(store)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


# (step, the live change and the one that undoes it, what the alert's reason names, how long the step lasts)
STEPS = [("bandwidth halved", lambda link: ({"bandwidth_gbps": link.bandwidth_gbps / 2},
                                            {"bandwidth_gbps": link.bandwidth_gbps}), "bw_MBps A1>B1", 0),
         ("delay +10 %", lambda link: ({"delay_ms": link.propagation_ms * 1.1}, {"delay_ms": link.propagation_ms}),
          "owd_ms", 0),
         ("loss 0.1 %", lambda link: ({"loss": 0.001}, {"loss": 0}), "loss A1-B1", 0),
         ("down 30 s", lambda link: ({"down": True}, {"down": False}), "datagrams arrived", 30)]


@needs_root
@pytest.mark.timeout(900)  # one testbed for the four steps: about 6 minutes alone, 10 on a loaded host
def test_injected_steps_are_each_alerted_within_two_periods_and_cleared(tmp_path, receiver):
    """The accelerated schedule (ops/monitor_bench.py: probe periods of 5 s, MPI every
    20 s) on a 10 ms, 200 Mb/s link. Each step is a live change of the running link
    (`testbed set`, testbed/live.py; down cuts the fibre), made just after an MPI test
    so that no test spoils the periods that follow, and undone the same way once
    alerted (down: after 30 s). The probe's steps are alerted by the judgement after
    the second period's end, the bandwidth by the second MPI test after the step. The
    service keeps every change, and the dashboard lists them. One testbed learns the
    path's references once (2 minutes: 6 MPI tests) and then takes the four steps one
    after the other, each cleared before the next: the references stay those of the
    link as the federation has it."""
    from geofed.ops import monitor_bench, monitor_dashboard, monitor_serve
    from geofed.testbed import core, live
    name = "gfmon-steps"
    fed_path = tmp_path / f"{name}.toml"
    fed_path.write_text(two_site_federation(name, rtt_ms=10.0, gbps=0.2))
    store = tmp_path / "m.sqlite"
    schedule = tmp_path / "s.toml"
    schedule.write_text(monitor_bench.accelerated(fed_path, store, ["A1-B1"], f'webhook = "{receiver.url}"',
                                                  throughput_every_s=0))
    s = monitor_serve.load(schedule)
    period, lost_after, mpi_every = s.owd.period_s, s.owd.lost_after_s, s.mpi.every_s
    with own_testbed(fed_path, name):
        fed = federation.load(fed_path)
        (link,) = core.make_plan(fed).links
        serving = Serving(schedule, tmp_path / "serve.log")
        took = {}
        try:
            wait_until(lambda: references(store) >= {"owd_ms", "loss", "latency_us", "bw_MBps"}, 300,
                       "the path's references learnt")
            assert run_geofed("monitor", "status", str(store)).returncode == 0 and receiver.posts == []
            for step, changes, named, lasts in STEPS:
                change, undo = changes(link.link)
                done = mpi_done(serving)
                wait_until(lambda: mpi_done(serving) > done, mpi_every + 60, f"an MPI test to end before {step}")
                sent = len(receiver.posts)
                live.set_link(fed, link.link.name, change)
                stepped = time.time()
                probe_step = named != "bw_MBps A1>B1"
                wait_until(lambda: len(receiver.posts) > sent, 2 * period + lost_after + 1 if probe_step
                           else 2 * mpi_every + 60, f"the alert of {step}")
                alerted = time.time()
                alert = receiver.posts[-1]
                assert alert["what"] == "alert" and named in alert["reason"], f"{step}: {alert}"
                assert alert["state"] == ("down" if lasts else "degraded"), f"{step}: {alert}"
                if not probe_step:  # the second bandwidth sample since the step, not a later one
                    after = samples(store, f"metric='bw_MBps' AND t > {stepped}")
                    assert len(after) <= 2, (step, after)
                else:
                    assert run_geofed("monitor", "status", str(store)).returncode == 1
                wait_until(lambda: time.time() >= stepped + lasts, lasts + 1, f"{step} held for {lasts} s")
                live.set_link(fed, link.link.name, undo)  # the link as the federation has it
                undone = time.time()
                wait_until(lambda: len(receiver.posts) > sent + 1, 3 * mpi_every + 60, f"the clear of {step}")
                clear = receiver.posts[-1]
                assert clear["what"] == "clear" and clear["event"] == alert["event"], f"{step}: {clear}"
                took[step] = (alerted - stepped, time.time() - undone)
            assert receiver.whats() == ["alert", "clear"] * len(STEPS)
            assert run_geofed("monitor", "status", str(store)).returncode == 0
            kept = Store(store, create=False)
            try:  # every change and its undoing, each way, as `testbed set` recorded them
                keys = {key for _, changes, _, _ in STEPS for key in changes(link.link)[0]}
                assert {(key, way) for _, _, way, key, _, _ in kept.link_changes()} == \
                    {(key, way) for key in keys for way in ("A->B", "B->A")}
                assert len(kept.link_changes()) == 2 * 2 * len(STEPS)
            finally:
                kept.close()
            page = monitor_dashboard.write(str(store), tmp_path / "dash").read_text()
            assert page.count("<table class='changes'>") == 1 and page.count("<td>A-&gt;B</td>") == 2 * len(STEPS)
        finally:
            assert serving.stop() == 0, serving.text()
            print("\n".join([f"{step}: alerted after {a:.1f} s, cleared {c:.1f} s after undone"
                             for step, (a, c) in took.items()]
                            + [line for line in serving.text().splitlines() if not line.startswith("stored")]))
        assert "stopped" in serving.text()
        assert probes_running(name) == []


@needs_root
def test_kill_9_loses_no_stored_sample_and_the_schedule_resumes(tmp_path, receiver):
    name = "gfmon-kill"
    fed_path = write_two_site(tmp_path, name)
    schedule = tmp_path / "s.toml"
    # MPI at once and then every 25 s; throughput at once and then not for 1000 s
    schedule.write_text(SCHEDULE.format(fed=fed_path, period=1.0, mpi_every=25, tp_every=1000,
                                        webhook=receiver.url, judge_extra=""))
    store = tmp_path / "m.sqlite"
    with own_testbed(Path(fed_path), name):
        first = Serving(schedule, tmp_path / "first.log")
        try:
            wait_until(lambda: "mpi A1-B1 done" in first.text() and "throughput A1-B1 done" in first.text(),
                       120, "the first MPI and throughput tests")
            seen = len(first.stored_ids())
            wait_until(lambda: len(first.stored_ids()) >= seen + 3, 30, "more probe samples")
            first.proc.kill()  # kill -9, mid-run: the probes are sampling
            assert first.proc.wait(30) == -signal.SIGKILL
        finally:
            first.stop()
        reported = first.stored_ids()
        stored = {r[0] for r in samples(store)}
        assert reported and reported <= stored, f"lost: {sorted(reported - stored)}"
        wait_until(lambda: probes_running(name) == [], 10, "the killed service's probes gone with it")
        db = sqlite3.connect(store)
        (mpi_next,) = db.execute("SELECT next_t FROM due WHERE test='mpi'").fetchone()
        (tp_next,) = db.execute("SELECT next_t FROM due WHERE test='throughput'").fetchone()
        db.close()
        last_before = max(stored)
        tp_before = len(samples(store, "metric='throughput_Mbps'"))

        restarted = time.time()
        assert mpi_next > restarted  # so the resumed schedule must wait for it
        second = Serving(schedule, tmp_path / "second.log")
        try:
            wait_until(lambda: "serving 1 path" in second.text(), 60, "the restarted service")
            resumed = re.findall(r"^resuming: (\w+) A1-B1 next at", second.text(), re.M)
            assert sorted(resumed) == ["mpi", "throughput"]
            wait_until(lambda: "mpi A1-B1 done" in second.text(), 90, "the resumed MPI test")
            after = samples(store, f"id > {last_before} AND metric='latency_us'")
            assert after and after[0][1] >= mpi_next - 0.5, "the MPI test ran before it was due"
            assert after[0][3] is not None and after[0][3] > 900, after  # one way over a 2 ms RTT link
            assert len(samples(store, "metric='throughput_Mbps'")) == tp_before  # not due for 1000 s
            assert tp_next > time.time() + 900
            assert min(second.stored_ids()) > last_before
        finally:
            assert second.stop() == 0, second.text()
        assert probes_running(name) == []


def test_the_documented_schedule_is_a_valid_one():
    from geofed.ops import monitor_serve
    from conftest import REPO
    text = (REPO / "docs" / "monitor.md").read_text()
    example = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    s = monitor_serve.loads(example, REPO / "docs" / "monitor.toml")
    assert s.paths == [("W1", "G1"), ("W2", "G2")] and s.judge.thresholds == {"owd_ms": 12.0}
    assert s.judge.stale_s == 32 and s.alerts.webhook.startswith("http://127.0.0.1")


def test_a_delay_between_clocks_carries_their_error_bound():
    from geofed.ops import owd
    here = owd.boot_id()
    assert owd.error_bound_ns(here, -1, here, -1) == 0  # one kernel's clock: no offset between the ends
    assert owd.error_bound_ns(b"x" * 16, 300_000, here, 200_000) == 500_000
    assert owd.error_bound_ns(b"x" * 16, -1, here, 200_000) == -1  # an unsynchronised clock bounds nothing
    assert isinstance(owd.clock_maxerror_ns(), int)


def test_status_names_a_sustained_level_shift_and_a_silent_service(tmp_path):
    fed = federation.load(Path(write_two_site(tmp_path, "gfmon-shift")))
    store = Store(tmp_path / "m.sqlite")
    st = judge.Settings(reference_samples=5, reference_tolerance=0.2)
    now = time.time()
    t = fill(store, now - 40, 20, 1.05)
    fill(store, t, 20, 1.2)  # +14 %: within this reference's tolerance, but it lasts
    ((path, state, reason),) = judge.status(store, fed, st, now)
    assert (path, state) == ("A1-B1", "ok")
    assert re.fullmatch(r"owd_ms A1>B1 shifted 1.05 ms -> 1.2 ms at \d\d:\d\d:\d\d", reason)
    ((_, state, reason),) = judge.status(store, fed, st, now + st.stale_s + 1)
    assert state == "down"  # the newest sample was at now - 1
    assert reason.startswith("no probe sample for 62 s (is `geofed monitor serve` running?)")
    store.close()
