#!/usr/bin/env bash
# Configures and builds Fanout into build/ (or $FANOUT_BUILD_DIR). Incremental when re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FANOUT_BUILD_DIR:-build}
tests=${FANOUT_BUILD_TESTS:-ON}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFANOUT_BUILD_TESTS="$tests" >/dev/null
cmake --build "$build" -j "$(nproc)"
