#!/usr/bin/env bash
# README command 2: install what is needed, build, bring up what the tests talk to (a real single-host Slurm
# cluster with PMIx: partition debug = 4 virtual nodes, partition scale = 160 for the 128+16-node sweep), and
# run the whole test suite. .ci/run calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
scripts/slurm-cluster.sh scale 160   # before the build: libpmix must be installed before slurmd starts
FANOUT_BUILD_TESTS=ON scripts/build.sh
cd "${FANOUT_BUILD_DIR:-build}"
# Tests are independent (own temp folders, ephemeral ports, own Slurm jobs): two at a time on 2 cores.
ctest -j "$(nproc)" --output-on-failure --timeout 900
cd - >/dev/null
# The parsers under libFuzzer (clang, its own build in build-fuzz/), a bounded time each, corpora in the repo.
FANOUT_FUZZ_SECONDS=${FANOUT_FUZZ_SECONDS:-20} scripts/fuzz.sh
