"""An SST process keeps a step's freed buffers for the next step (stream.KEEP_STEP_BUFFERS)."""

import subprocess
import sys

from geofed.apps.grayscott import stream

# A step at L = 128 as a writer holds it: one block above glibc's 32 MiB mmap limit,
# touched, then freed. Prints how much resident memory the free gave back to the kernel
# (which the next step then faults in again, page by page), in MB.
STEP = """
import ctypes, os
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
size = 2 * 128 ** 3 * 8 + 4096
p = libc.malloc(size)
ctypes.memset(p, 1, size)
held = resident()
libc.free(p)
print((held - resident()) / 1e6)
"""


def returned_mb(prefix: list[str]) -> float:
    return float(subprocess.run([*prefix, sys.executable, "-c", STEP], capture_output=True, text=True,
                                check=True).stdout)


def test_a_plain_process_gives_the_step_back_to_the_kernel():
    assert returned_mb([]) > 30


def test_an_sst_process_keeps_the_step_for_the_next_one():
    assert returned_mb(stream.preload_argv()) < 1
