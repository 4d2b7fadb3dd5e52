#!/usr/bin/env bash
# The whole test suite: the native parts with cargo, then everything else with pytest.
# Testbed tests need root (network namespaces); run ./setup.sh first.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$HOME/.cargo/bin:$PATH"
if cargo fmt --version >/dev/null 2>&1; then
  (cd rust && cargo fmt --check)
else
  echo "test.sh: rustfmt is not installed; Rust formatting not checked" >&2
fi
cargo test -q --manifest-path rust/Cargo.toml
# geofed's bytecode, compiled once: every geofed process of the suite (each CLI call, rank,
# probe, transfer end) then loads it instead of compiling the sources again, 0.2-0.3 s of CPU
# each, which an environment with PYTHONDONTWRITEBYTECODE set would have it do every time
.venv/bin/python -m compileall -q src
# the slowest tests named at the end, so that a run shows where the suite's time goes
.venv/bin/python -m pytest -q --durations=25 "$@"
