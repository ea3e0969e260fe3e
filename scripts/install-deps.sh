#!/usr/bin/env bash
# Installs every Debian 12 package Fanout needs to build, run and test. Idempotent and non-interactive:
# packages already present are not touched, so re-running costs one dpkg query.
# Usage: scripts/install-deps.sh [run|test]   (test adds what the test suite needs)
set -euo pipefail
profile=${1:-run}
export DEBIAN_FRONTEND=noninteractive

run_pkgs=(build-essential cmake git pkg-config ca-certificates
  libcli11-dev libtomlplusplus-dev libsqlite3-dev sqlite3
  libslurm-dev libpmix-dev nlohmann-json3-dev zlib1g-dev gnuplot-nox libpcre2-dev
  redis-server redis-tools libhiredis-dev libibverbs-dev
  libssl-dev  # libcrypto: HMAC-SHA256 of parameter_serving's multicast datagrams
  libpq-dev  # a lab store in PostgreSQL (fanout history --lab=postgresql://...)
  libtorch-dev libopenblas0-openmp  # libopenblas: the reference BLAS makes ResNet-50 ~7x slower
  gfortran python3-dev pybind11-dev python3-numpy)  # the tensor client's Fortran module and Python package
test_pkgs=(libgtest-dev libgmock-dev libbenchmark-dev procps e2fsprogs chromium iperf3
  openmpi-bin stress-ng  # PBS's default step launcher (mpirun) for real; a saturated machine for scripts/test.sh --under-load
  libopenmpi-dev  # an MPI program for exec's mpi_program steps (tests/clients/exec_mpi_probe.c)
  postgresql  # a real PostgreSQL server for the lab store's tests (started by the tests in a folder of their own)
  clang-14 libclang-rt-14-dev llvm-14)  # the last three for scripts/fuzz.sh: clang, libFuzzer + sanitizers, symbolizer

pkgs=("${run_pkgs[@]}")
[ "$profile" = test ] && pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
else
  # Package installs must never start services here: the project starts its own daemons when it needs them.
  if [ ! -x /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi
  echo "install-deps: installing ${missing[*]}"
  apt-get -o DPkg::Lock::Timeout=900 update -qq
  apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
fi
# The Redis module API header is only in Debian's redis source package (for plugins/smartsim's module).
"$(dirname "$0")/fetch-redismodule-h.sh"
