"""The plotters draw in a child process at the lowest priority: reading never waits for a frame."""

import multiprocessing
import os
import select
import subprocess
import sys

import matplotlib
import pytest

from geofed.apps.grayscott.consumer import FrameDrawer, FrameError

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture
def fig():
    f, ax = plt.subplots()
    yield f
    plt.close(f)


def test_frames_queue_while_one_is_drawn_and_come_out_in_step_order(tmp_path, fig):
    release = multiprocessing.get_context("fork").Event()

    def draw(step, picked):
        release.wait(60)  # the first frame cannot finish until the reader has queued them all
        fig.suptitle(f"{step} {picked}")

    drawer = FrameDrawer(fig, draw, tmp_path, "t")
    for step, picked in ((10, "a"), (20, "b"), (30, "c")):
        drawer.put(step, picked)  # returns at once, while the drawer is held
    assert list(tmp_path.iterdir()) == []
    assert os.getpriority(os.PRIO_PROCESS, drawer.process.pid) == 19
    release.set()
    frames = drawer.finish()
    assert [f.name for f in frames] == ["t-000010.png", "t-000020.png", "t-000030.png"]
    assert all(f.stat().st_size > 0 for f in frames)
    assert not drawer.process.is_alive()


def test_a_frame_that_fails_is_reported_where_the_plotter_finishes(tmp_path, fig):
    def draw(step, picked):
        if step == 20:
            raise ValueError("no colour map 'nope'")

    drawer = FrameDrawer(fig, draw, tmp_path, "t")
    for step in (10, 20, 30):
        drawer.put(step, None)
    with pytest.raises(FrameError, match=r"exit status 1\); 1 of 3 drawn"):
        drawer.finish()
    assert [f.name for f in tmp_path.iterdir()] == ["t-000010.png"]


def test_the_drawer_ends_with_its_plotter(tmp_path):
    plotter = subprocess.Popen([sys.executable, "-c", PLOTTER, str(tmp_path)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    drawer_pid = int(plotter.stdout.readline())
    drawer = os.pidfd_open(drawer_pid)
    try:
        plotter.kill()  # SIGKILL: no exit handler of the plotter runs
        plotter.wait()
        assert select.select([drawer], [], [], 30)[0] == [drawer], "the drawer outlived its plotter"
    finally:
        os.close(drawer)


# A plotter with its drawer started, idle until killed.
PLOTTER = """
import sys
from pathlib import Path
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from geofed.apps.grayscott.consumer import FrameDrawer
fig, _ = plt.subplots()
d = FrameDrawer(fig, lambda step, picked: None, Path(sys.argv[1]), "t")
print(d.process.pid, flush=True)
sys.stdin.read()
"""
