# bench/run-all's figures for the shell benches (the C++ ones use bench/figures.h): `figure metric value unit`
# appends "metric 0 value unit t" to $FANOUT_FIGURES when set. An empty value is a failed measurement: the bench
# fails rather than store nothing or a made-up 0. Sourced, not run.
figure() {
  [ -n "$2" ] || { echo "$(basename "$0"): no value for $1 (a measurement failed)" >&2; exit 1; }
  [ -z "${FANOUT_FIGURES:-}" ] || echo "$1 0 $2 $3 $(date +%s.%N)" >>"$FANOUT_FIGURES"
}
