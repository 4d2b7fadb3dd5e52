"""The one entry point of every rank program: python -m geofed.workloads NAME PARAMS RESULT.

Every rank runs the workload's `rank()` with its parameters (JSON); rank 0 writes the
data it returns to RESULT. A rank that fails says why in one line and ends the whole
job (the others would wait for it until the timeout): exit 2 for a request it
refuses, the status of a JobFailed it raises (a Gray-Scott part's stream that never
opened: 3), 1 for anything else.
"""

from __future__ import annotations

import json
import os
import sys

from geofed import runtime
from geofed.errors import JobFailed, UserError
from geofed.workloads import get


def main(argv: list[str]) -> int:
    from mpi4py import MPI
    name, params_json, result = argv
    try:
        w = get(name)
        data = w.rank(MPI.COMM_WORLD, w.params_from_dict(json.loads(params_json), w.RankParams))
    except UserError as e:
        return runtime.refuse(f"geofed.workloads {name}", e, 2)
    except JobFailed as e:
        return runtime.refuse(f"geofed.workloads {name}", e, e.status)
    except Exception as e:  # one line for the user, the job ended for every rank
        return runtime.refuse(f"geofed.workloads {name} at rank {MPI.COMM_WORLD.Get_rank()}",
                              RuntimeError(f"{type(e).__name__}: {e}"), 1)
    if data is not None:
        tmp = f"{result}.part"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, result)  # the caller never reads half a result
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
