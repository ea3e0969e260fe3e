# bench/run-all's figures for the shell benches (the C++ ones use bench/figures.h): `figure metric value unit`
# appends "metric 0 value unit t" to $FANOUT_FIGURES when set. An empty value is a failed measurement: the bench
# fails rather than store nothing or a made-up 0. Sourced, not run.
figure() {
  [ -n "$2" ] || { echo "$(basename "$0"): no value for $1 (a measurement failed)" >&2; exit 1; }
  [ -z "${FANOUT_FIGURES:-}" ] || echo "$1 0 $2 $3 $(date +%s.%N)" >>"$FANOUT_FIGURES"
}

# A bench's work folder once it is done with it: moved into $FANOUT_BENCH_TRASH when run-all gives one (it empties
# it once every round has run), else removed. Why not removed between rounds: ext4 without a journal (this VM's
# root) steps over every inode freed in the last 5 minutes when it makes one (fs/ext4/ialloc.c, recently_deleted),
# so a round that starts right after the one before deleted its folders pays for that deletion: driver_scale_bench's
# 1,000 runs laid out their folders in 0.08 s in a first round and 0.39 and 0.61 s in the next two (2026-12-06).
# Only within one filesystem: a move to another would copy the folder, then delete it here at once.
discard_work() {
  if [ -n "${FANOUT_BENCH_TRASH:-}" ] && [ -d "$FANOUT_BENCH_TRASH" ] && [ "$(stat -c %d "$1")" = "$(stat -c %d "$FANOUT_BENCH_TRASH")" ]; then
    mv "$1" "$FANOUT_BENCH_TRASH/" 2>/dev/null || rm -rf "$1"
  else
    rm -rf "$1"
  fi
}
