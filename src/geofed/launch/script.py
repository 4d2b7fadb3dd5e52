"""How a Python rank of geofed's own Python runs the user's program:
`python -m geofed.launch.script (SCRIPT | -m MODULE | -c CODE) ARGS...`.

The program runs as `python SCRIPT ARGS` would run it. When it raises or calls
sys.exit with a non-zero status, its traceback (or message) goes to stderr and the
process ends at once with that status, without MPI_Finalize: plain Python would wait
there for ranks that wait for this one, and MPI_Abort would have Hydra kill the rank
wrapper (geofed.launch.rank) before it could name the rank. A program that ends
well exits as usual, and mpi4py finalizes MPI.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-m", "-c") and len(argv) < 2:
        sys.exit("usage: python -m geofed.launch.script (SCRIPT | -m MODULE | -c CODE) ARGS...")
    try:
        if argv[0] == "-m":  # sys.path[0] is the current directory already, as `python -m` has it
            sys.argv = argv[1:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c"] + argv[2:]
            sys.path[0] = ""  # as `python -c` has it
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = argv
            sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))  # as `python SCRIPT` has it
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        status = _status(e)
    except KeyboardInterrupt:
        status = 130
    except BaseException as e:  # any failure of the program ends this rank
        traceback.print_exception(type(e), e, _users_frames(e.__traceback__))
        status = 1
    else:
        return 0
    if status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return 0


def _status(e: SystemExit) -> int:
    """The exit status sys.exit(code) asks for; a message is printed as Python would."""
    if e.code is None or isinstance(e.code, int):
        return e.code or 0
    print(e.code, file=sys.stderr)
    return 1


def _users_frames(tb):
    """The traceback from the user's program on: this module's and runpy's frames are ours."""
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__)
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")):
        tb = tb.tb_next
    return tb


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
