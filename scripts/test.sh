#!/usr/bin/env bash
# README command 2: install what is needed, build, bring up what the tests talk to (a real single-host Slurm
# cluster with PMIx: partition debug = 4 virtual nodes, partition scale = 160 for the 128+16-node sweep; a Grid
# Engine cell on this host), and
# run the whole test suite. .ci/run calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
# The number of tests this tree has (raise it with every test added): fewer listed means some vanished.
FANOUT_MIN_TESTS=509
scripts/install-deps.sh test
scripts/slurm-cluster.sh scale 160   # before the build: libpmix must be installed before slurmd starts
scripts/sge-cluster.sh up             # a Grid Engine cell beside it (sge_qmaster + sge_execd) for tests/sge_test.cpp
FANOUT_BUILD_TESTS=ON scripts/build.sh
cd "${FANOUT_BUILD_DIR:-build}"
# Every part must have been built: CMake skips the libtorch/hiredis/redismodule.h parts with only a warning, and
# a suite that silently lost its smartsim, inference or torchloader tests must fail here, not pass.
for t in smartsim_test redisai_test resnet50_test torchloader_test torchloader_trainer_test plugins/redisai.so \
         plugins/fanout-redisai-check plugins/fanout_smartsim.so plugins/fanout_torchloader.so; do
  [ -e "$t" ] || { echo "test.sh: $t was not built (a dependency is missing; see the cmake warnings)" >&2; exit 1; }
done
listed=$(ctest -N | sed -n 's/^Total Tests: //p')
if [ "${listed:-0}" -lt "$FANOUT_MIN_TESTS" ]; then
  echo "test.sh: ctest lists ${listed:-0} tests, fewer than the $FANOUT_MIN_TESTS this tree has: some were not discovered" >&2
  exit 1
fi
# Tests are independent (own temp folders, ephemeral ports, own Slurm jobs): two at a time on 2 cores.
ctest -j "$(nproc)" --output-on-failure --timeout 900
# A test that skipped itself (GTEST_SKIP: a missing daemon, a missing package) passed nothing: the suite fails.
if grep -q '^\[  SKIPPED \]' Testing/Temporary/LastTest.log 2>/dev/null; then
  echo "test.sh: tests skipped themselves, which CI counts as failures:" >&2
  grep '^\[  SKIPPED \]' Testing/Temporary/LastTest.log | sort -u >&2
  exit 1
fi
cd - >/dev/null
# The parsers under libFuzzer (clang, its own build in build-fuzz/), a bounded time each, corpora in the repo.
FANOUT_FUZZ_SECONDS=${FANOUT_FUZZ_SECONDS:-15} scripts/fuzz.sh
# Every benchmark once at small sizes (bench/run-all --quick): fails when a bench crashes or prints no figures,
# never on speed; its report goes to its own folder, not docs/.
bench/run-all --quick --build "${FANOUT_BUILD_DIR:-build}" --out "$(mktemp -d /var/tmp/fanout-bench-quick-XXXXXX)"
