#!/usr/bin/env bash
# Install everything geofed needs on a fresh Debian machine (run as root):
# system packages, a virtual environment at .venv, and the native (Rust) programs.
# Safe to run again: every step skips what is already there.
set -euo pipefail
cd "$(dirname "$0")"

apt_missing=()
command -v ip >/dev/null || apt_missing+=(iproute2)
command -v tc >/dev/null || apt_missing+=(iproute2)
command -v cc >/dev/null || apt_missing+=(gcc)
command -v cargo >/dev/null || [ -x "$HOME/.cargo/bin/cargo" ] || apt_missing+=(cargo)
# The system's interpreter by default, not one under /root (mode 700): every user of
# the machine must be able to run the installed geofed (the ssh and Slurm paths do).
PY=${PYTHON:-/usr/bin/python3}
command -v "$PY" >/dev/null || apt_missing+=(python3)
if command -v "$PY" >/dev/null && ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then apt_missing+=(python3-venv); fi
# SimGrid, the simulation peer of `geofed bench model` (Debian's module, for the system python3)
/usr/bin/python3 -c 'import simgrid' 2>/dev/null || apt_missing+=(python3-simgrid)
if [ ${#apt_missing[@]} -gt 0 ]; then
  echo "setup: installing ${apt_missing[*]} with apt"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "${apt_missing[@]}"
fi
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "setup: geofed needs Python 3.11 or newer ($PY is older)" >&2; exit 2; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'

echo "setup: building the native programs (rust/)"
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q --manifest-path rust/Cargo.toml
install -m 755 rust/target/release/geofed-linkemu rust/target/release/geofed-probe .venv/bin/
# Python extensions (PyO3): every crate of the workspace with a pyproject.toml.
for py in rust/*/pyproject.toml; do
  [ -e "$py" ] || continue
  .venv/bin/python -m pip install -q 'maturin>=1.5,<2'
  echo "setup: building the Python extension $(dirname "$py")"
  VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop -q --release -m "$(dirname "$py")/Cargo.toml"
done
# The MPI benchmark kernels (timed loops in C, loaded by geofed.bench.kernels with
# ctypes), built with the venv's mpicc so they use the same libmpi as mpi4py.
# Rebuilt only when the source is newer than the library.
lib=.venv/lib/libgeofed_bench.so
if [ ! -e "$lib" ] || [ src/geofed/bench/kernels.c -nt "$lib" ]; then
  echo "setup: building the MPI benchmark kernels ($lib)"
  .venv/bin/mpicc -O2 -Wall -shared -fPIC -o "$lib" src/geofed/bench/kernels.c
fi
# The seed fix preloaded into SST processes (src/geofed/apps/grayscott/sstseed.c).
seedlib=.venv/lib/libgeofed_sstseed.so
if [ ! -e "$seedlib" ] || [ src/geofed/apps/grayscott/sstseed.c -nt "$seedlib" ]; then
  echo "setup: building the SST seed fix ($seedlib)"
  cc -O2 -Wall -shared -fPIC -o "$seedlib" src/geofed/apps/grayscott/sstseed.c -ldl
fi
echo "setup: done; try: .venv/bin/geofed demo"
