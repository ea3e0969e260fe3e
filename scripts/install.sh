#!/usr/bin/env bash
# Installs Fanout into a prefix (default /usr/local, whose bin/ is on PATH): the driver and rank runner in bin/,
# plugins and the RedisAI-style module in lib/fanout/plugins (found there by the installed driver), the plugin
# SDK headers in include/fanout, and the batch scripts in share/fanout/batch_scripts with the installed driver as
# their default FANOUT (so `sbatch <prefix>/share/fanout/batch_scripts/slurm_sweep.sh` works without setting it).
# Installs the Debian packages and builds first (scripts/build.sh; about 10 minutes on 2 cores from scratch).
# Usage: scripts/install.sh [PREFIX]     Env: FANOUT_BUILD_DIR (build), FANOUT_BUILD_TESTS (OFF)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-/usr/local}
scripts/install-deps.sh run
FANOUT_BUILD_TESTS=${FANOUT_BUILD_TESTS:-OFF} scripts/build.sh
cmake --install "${FANOUT_BUILD_DIR:-build}" --prefix "$prefix" >/dev/null
echo "installed: $prefix/bin/fanout ($("$prefix/bin/fanout" --version)); plugins in $prefix/lib/fanout/plugins;" \
     "batch scripts in $prefix/share/fanout/batch_scripts"
