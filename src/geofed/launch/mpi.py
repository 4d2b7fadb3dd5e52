"""Which MPI a command uses: one setting, `--mpi` or GEOFED_MPI (docs/launch.md).

- `mpich` (default): the MPICH that ./setup.sh installs into the venv from PyPI;
- `openmpi`: Debian's Open MPI, which `GEOFED_MPI=openmpi ./setup.sh` installs beside it
  (`/usr/bin/mpirun.openmpi`, libmpi under /usr/lib/x86_64-linux-gnu);
- `path`: the site's own MPI, the `mpiexec` and `mpicc` first on PATH outside the venv
  (after `module load openmpi`, say); its kind (Hydra or Open MPI) is read from
  `mpiexec --version`.

The choice is detected once per process and travels to the ranks in GEOFED_MPI, so a
rank loads the same libmpi (mpi4py through MPI4PY_LIBMPI) and geofed's C libraries
built against it: MPICH's keep their names (`libgeofed_bench.so`), another MPI's carry
its choice (`libgeofed_bench.openmpi.so`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from geofed.errors import UserError

CHOICES = ("mpich", "openmpi", "path")
ENV = "GEOFED_MPI"
NAMES = {"mpich": "MPICH", "openmpi": "Open MPI"}
# How the testbed makes ranks of different nodes talk (TESTBED_MPI_ENV, OPENMPI_TESTBED_MCA).
TESTBED_TRANSPORT = {"mpich": "ch4:ucx, UCX tcp between nodes",
                     "openmpi": "ob1, btl tcp between nodes, vader within one"}
# Under the testbed's Slurm, srun starts Open MPI's ranks without vader (OPENMPI_SRUN_TESTBED_MCA).
SRUN_TESTBED_TRANSPORT = dict(TESTBED_TRANSPORT, openmpi="ob1, btl tcp between nodes and within one")
# srun's PMI for each MPI: Debian's Open MPI 4.1 speaks PMIx only (no pmi2 component);
# MPICH's PyPI build aborts under --mpi=pmix (docs/slurm.md).
SRUN_PMI = {"mpich": "pmi2", "openmpi": "pmix"}
SETUP_FIX = {"mpich": "run ./setup.sh", "openmpi": "run GEOFED_MPI=openmpi ./setup.sh",
             "path": "load your MPI (module load ...) so that mpiexec and mpicc are on PATH, then run "
                     "GEOFED_MPI=path ./setup.sh"}


@dataclass(frozen=True)
class Mpi:
    choice: str  # one of CHOICES
    implementation: str  # "mpich" or "openmpi": the launch syntax and mpi4py's ABI
    version: str
    launcher: str  # mpiexec (Hydra) or mpirun (Open MPI)
    libmpi: str

    @property
    def name(self) -> str:
        return f"{NAMES[self.implementation]} {self.version}"

    def rank_env(self) -> dict[str, str]:
        """What every rank needs to load this MPI: mpi4py is told the libmpi, and geofed's
        libraries are chosen by GEOFED_MPI."""
        return {ENV: self.choice, "MPI4PY_LIBMPI": self.libmpi}

    def meta(self, testbed: bool) -> dict[str, str]:
        """What a record says about the MPI that produced it."""
        in_slurm = bool(os.environ.get("SLURM_JOB_ID"))  # runner.command launches with srun there
        transports = SRUN_TESTBED_TRANSPORT if in_slurm else TESTBED_TRANSPORT
        launcher = f"srun --mpi={SRUN_PMI[self.implementation]}" if in_slurm else self.launcher
        return {"mpi": self.implementation, "mpi_version": self.version, "mpi_launcher": launcher,
                "mpi_transport": transports[self.implementation] if testbed else "the MPI's own choice"}


def choice() -> str:
    value = os.environ.get(ENV, "mpich") or "mpich"
    if value not in CHOICES:
        raise UserError(f"{ENV}={value!r}: the MPI is one of {', '.join(CHOICES)}")
    return value


def program(name: str) -> str:
    """The file name of geofed's program or library `name` (`stem.so`) built against the
    chosen MPI; a rank calls it too, so it asks nothing of the MPI itself."""
    which = choice()
    if which == "mpich":
        return name
    stem, dot, ext = name.partition(".")
    return f"{stem}.{which}{dot}{ext}"


@cache
def current() -> Mpi:
    """The MPI this process uses, detected once; a launching command says which (announce)."""
    which = choice()
    if which == "mpich":
        venv = Path(sys.executable).parent
        return Mpi(which, "mpich", _launcher_version(str(venv / "mpiexec"))[1], str(venv / "mpiexec"),
                   str(Path(sys.prefix) / "lib" / "libmpi.so.12"))
    if which == "openmpi":
        launcher = "/usr/bin/mpirun.openmpi"
        libdir = Path("/usr/lib") / sysconfig.get_config_var("MULTIARCH")
        return _found(which, launcher, [libdir / "libmpi.so.40"])
    launcher = shutil.which("mpiexec", path=_path_outside_venv())
    if launcher is None:
        raise UserError(f"{ENV}=path: no mpiexec on PATH outside {Path(sys.executable).parent}; {SETUP_FIX['path']}")
    prefix = Path(launcher).resolve().parent.parent
    libdirs = [prefix / "lib", prefix / "lib64", prefix / "lib" / sysconfig.get_config_var("MULTIARCH")]
    return _found(which, launcher, [d / f for d in libdirs for f in ("libmpi.so", "libmpi.so.40", "libmpi.so.12")])


def _found(which: str, launcher: str, libmpis: list[Path]) -> Mpi:
    if not Path(launcher).is_file():
        raise UserError(f"{ENV}={which}: {launcher} is not installed; {SETUP_FIX[which]}")
    libmpi = next((p for p in libmpis if p.is_file()), None)
    if libmpi is None:
        raise UserError(f"{ENV}={which}: no libmpi beside {launcher} (looked for {libmpis[0]}); {SETUP_FIX[which]}")
    implementation, version = _launcher_version(launcher)
    return Mpi(which, implementation, version, launcher, str(libmpi))


def _path_outside_venv() -> str:
    venv = str(Path(sys.executable).parent)
    return os.pathsep.join(d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d and d != venv)


def _launcher_version(launcher: str) -> tuple[str, str]:
    """(implementation, version) from `LAUNCHER --version`: Hydra says `Version: 5.0.2`,
    Open MPI `mpirun (Open MPI) 4.1.4` (`(OpenRTE)` before 5.0)."""
    try:
        out = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError as e:
        raise UserError(f"{launcher}: cannot run it ({e.strerror})") from None
    hydra = re.search(r"HYDRA build details:\s+Version:\s+(\S+)", out)
    if hydra:
        return "mpich", hydra[1]
    ompi = re.search(r"\((?:Open MPI|OpenRTE)\) (\S+)", out)
    if ompi:
        return "openmpi", ompi[1]
    raise UserError(f"{launcher} --version names neither Hydra (MPICH) nor Open MPI: {out.strip()[:200]!r}")


@cache
def announce() -> Mpi:
    """The MPI in use, said once per command on stderr when one was chosen: the default
    (MPICH) stays silent, so what `geofed run` shows stays the program's own output."""
    mpi = current()
    if os.environ.get(ENV):
        print(f"geofed: MPI: {mpi.name} ({mpi.launcher})", file=sys.stderr)
    return mpi
