#!/usr/bin/env bash
# README command 2: install what is needed, build, and run the whole test suite. .ci/run calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
FANOUT_BUILD_TESTS=ON scripts/build.sh
cd "${FANOUT_BUILD_DIR:-build}"
# Tests are independent (own temp folders, ephemeral ports): run them two at a time on 2 cores.
ctest -j "$(nproc)" --output-on-failure --timeout 600
