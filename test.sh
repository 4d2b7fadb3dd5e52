#!/usr/bin/env bash
# The whole test suite: the native parts with cargo, then everything else with pytest.
# Testbed tests need root (network namespaces); run ./setup.sh first.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$HOME/.cargo/bin:$PATH"
cargo test -q --manifest-path rust/Cargo.toml
.venv/bin/python -m pytest -q "$@"
