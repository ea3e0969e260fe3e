#!/usr/bin/env bash
# check-layers.sh [SOURCE_DIR]: exits 1 on any #include "..." that goes against the layer order (ctest: layers).
# A folder may include itself and what its ALLOW line names (a folder, or one header of it); plugins/<name> may
# include only itself and plugins/sdk. tests/ and bench/ reach into every layer and are not checked. Each
# allowed folder must sit lower in ORDER, so the table itself cannot grow a cycle. The same order is the one the
# per-folder CMake libraries link in (CMakeLists.txt), and docs/architecture.md draws it.
# check-layers.sh --table: prints the ALLOW table (ctest arch_doc compares it with docs/architecture.md's).
# It also fails when orchestrator/ names a backend (a scheduler or step launcher as a string literal outside a
# comment): what differs between backends is answered behind the Scheduler seam (schedulers/scheduler.h
# SchedulerTraits) and the step launcher registry, so that a new backend changes no line of the driver.
set -eu
ORDER="plugins/sdk common results rendezvous host launchers schedulers rank orchestrator"
ALLOW='
plugins/sdk:
common:       plugins/sdk/fanout_clock.hpp plugins/sdk/fanout_process.hpp
results:      common plugins/sdk/fanout_plugin.h
rendezvous:   common plugins/sdk
host:         common plugins/sdk
launchers:    common rendezvous
schedulers:   common rendezvous launchers results/layout.h
rank:         common rendezvous host plugins/sdk results/layout.h results/run_folder.h results/sample_file.h
orchestrator: common results rendezvous host launchers schedulers plugins/sdk
'
if [ "${1:-}" = --table ]; then printf '%s' "$ALLOW" | sed '/^$/d'; exit 0; fi
cd "${1:-.}"
backends='"(slurm|pbs|sge|local|auto|srun|mpirun|mpiexec|qsub|sbatch)"'
# "auto" is also --repeat=auto's word (a number of runs, not a backend): lines about repeats are not backend names.
named=$(grep -nE "$backends" orchestrator/*.h orchestrator/*.cpp | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' | grep -viE 'repeat' || true)
if [ -n "$named" ]; then
  echo "orchestrator names a backend (answer it behind the Scheduler seam or a registry):" >&2
  echo "$named" >&2
  exit 1
fi
files=$( { git ls-files -co --exclude-standard -- '*.h' '*.hpp' '*.cpp' '*.c' 2>/dev/null ||
           find . -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.c' \) | sed 's|^\./||'; } |
         grep -vE '^(tests|bench|build[^/]*|\.deps)/')
{ echo "$files"; echo "--"; grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files /dev/null; } |
awk -v order="$ORDER" -v allow="$ALLOW" '
function layer(p,  a) { if (p ~ /^plugins\/sdk(\/|$)/) return "plugins/sdk"
                        if (p ~ /^plugins\/[^\/]+\//) { split(p, a, "/"); return "plugins/" a[2] }
                        sub(/\/.*/, "", p); return p }
BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i
        m = split(allow, lines, "\n")
        for (i = 1; i <= m; i++) { if (lines[i] !~ /:/) continue
          split(lines[i], kv, ":"); f = kv[1]; known[f] = 1; k = split(kv[2], tgt, " ")
          for (j = 1; j <= k; j++) { ok[f, tgt[j]] = 1
            if (rank[layer(tgt[j])] >= rank[f]) { print "layer table: " f " -> " tgt[j] " is not downward"; bad = 1 } } } }
stage == 0 { if ($0 == "--") { stage = 1; next } exists[$0] = 1; next }
{ file = $0; sub(/:.*/, "", file); rest = substr($0, length(file) + 2); line = rest; sub(/:.*/, "", line)
  inc = rest; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
  from = layer(file); if (!(from in known) && from !~ /^plugins\//) next
  if (inc !~ /\//) { dir = file; sub(/\/[^\/]*$/, "", dir)        # a bare name: beside the file, or the SDK
    if ((dir "/" inc) in exists) next
    if (("plugins/sdk/" inc) in exists) inc = "plugins/sdk/" inc
    else if (inc == "version.h") inc = "common/version.h"          # generated from common/version.h.in
    else next }                                                    # external (redismodule.h, ...)
  else if (!(inc in exists) && (dir = file) && sub(/\/[^\/]*$/, "", dir) && ((dir "/" inc) in exists)) inc = dir "/" inc
  to = layer(inc); if (to == from) next
  if (from ~ /^plugins\// && from != "plugins/sdk") { if (to == "plugins/sdk") next }
  else if (ok[from, to] || ok[from, inc]) next
  printf "%s:%s: %s includes \"%s\" (%s) against the layer order\n", file, line, from, inc, to; bad = 1 }
END { exit bad }'
