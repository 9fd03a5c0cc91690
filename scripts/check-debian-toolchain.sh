#!/usr/bin/env bash
# Check that a machine without ~/.cargo gets a working Rust toolchain from Debian and
# builds the engine: a clean clone in a temporary directory, ~/.cargo hidden from PATH
# and a fresh CARGO_HOME (no cached crates), then install-deps, which installs Debian's
# rustc-web/cargo-web (1.96) when no Rust >= 1.85 is on PATH. Prints the time taken.
# Not part of `make test`: it rebuilds the engine from nothing (minutes on 2 cores).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$src" "$work/stacklab"
cd "$work/stacklab"
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/\.cargo/bin$' | paste -sd: -)
export PATH CARGO_HOME="$work/cargo-home" HOME="$work/home"
mkdir -p "$HOME"
start=$(date +%s)
bash scripts/install-deps.sh
echo "toolchain: $(cargo --version) at $(command -v cargo)"
.venv/bin/stacklab-load --version
echo "check-debian-toolchain: engine built without ~/.cargo in $(( $(date +%s) - start )) s"
