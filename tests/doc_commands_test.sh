#!/usr/bin/env bash
# The documentation's commands, run: every fenced code block whose info string is `console` or `sh` in README.md
# and docs/*.md. Fails (exit 1) naming the file:line of each block that failed, with its output.
#   tests/doc_commands_test.sh BUILD_DIR SOURCE_DIR
#
# Convention (also in docs/development.md, "Commands in the documentation"):
# - `console` block: each line starting with `$ ` is a command; a command whose line ends with `\` goes on over
#   the next lines. Other lines are expected output and are not checked.
# - `sh` block: the whole block is a bash script; every line that is not a comment is a command.
# - A command meant to fail is written `! command`: the block fails if it succeeds.
# - `<!-- doc-test: skip REASON -->` before a block: the block is not run (e.g. scripts/test.sh itself, an
#   install into /usr/local). The reason must not be empty; skipped blocks are listed with their reasons.
# - `<!-- doc-test: file NAME -->` before a block of any kind (toml, text, ...): the block is written to NAME in
#   the working folder before the command blocks after it in the same markdown file run (an experiment file
#   that a later `fanout run NAME` reads). NAME is relative, without `..`.
# - Other blocks (toml, text, ini, c, ...) are not run. A directive applies to the next fenced block; only blank
#   lines may stand between them.
# - Each markdown file's blocks run in order in one fresh temporary folder, each block in its own
#   `bash -eo pipefail` started there, with PATH=BUILD_DIR:$PATH (fanout and fanout-rank; the plugins are found
#   next to fanout) and a timeout of FANOUT_DOC_TIMEOUT seconds (600). The folder also holds `build` (a link to
#   BUILD_DIR) and links to the source tree's top-level entries (docs, scripts, batch_scripts, ...), so a
#   command reads paths as it would from a checkout; what it writes (results/, ...) stays in the folder.
#   HOME is that folder, and FANOUT_SITE and FANOUT_PLUGIN_PATH are unset: the examples assume no site profile
#   and only the build's plugins.
# - A console command is checked on its own: `a && b` fails the block when `a` fails. An `sh` block follows bash's
#   -e rules (a failure before the last command of `a && b` does not stop it).
# Last line: "doc test: N blocks run, M skipped (with reasons), F failed".
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
src=$(cd "$2" && pwd) || exit 2
[ -x "$build/fanout" ] || { echo "doc test: $build/fanout does not exist" >&2; exit 2; }
timeout_s=${FANOUT_DOC_TIMEOUT:-600}
scratch=$(mktemp -d /tmp/fanout-doc-test-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
export PATH="$build:$PATH"
unset FANOUT_SITE FANOUT_PLUGIN_PATH

run=0 skipped=0 failed=0
skips=() failures=()

# Splits one markdown file into records on stdout, one per fenced block or problem, fields separated by \x1f:
#   B <line> <info> <directive> <directive argument> <body file>
#   E <line> <message>
split_blocks() {  # file out_dir
  awk -v out="$2" '
    function flush_directive_error(msg) { printf "E\x1f%d\x1f%s\n", dline, msg; dkind = "" }
    BEGIN { n = 0; infence = 0; dkind = "" }
    {
      line = $0
      if (!infence) {
        if (match(line, /^[ ]*(```+|~~~+)/)) {
          fence_indent = RLENGTH; tok = substr(line, 1, RLENGTH); sub(/^[ ]*/, "", tok)
          fence_indent -= length(tok); fence = tok
          info = substr(line, RLENGTH + 1); sub(/^[ \t]+/, "", info); sub(/[ \t].*$/, "", info)
          infence = 1; start = NR; n++; body = out "/block" n
          printf "" > body
          kind = dkind; arg = darg; dkind = ""; darg = ""
          next
        }
        if (match(line, /^[ ]*<!--[ ]*doc-test:/)) {
          if (dkind != "" && dkind != "bad") flush_directive_error("a doc-test directive not followed by a fenced block")
          d = line; sub(/^[ ]*<!--[ ]*doc-test:[ ]*/, "", d)
          if (d !~ /-->[ ]*$/) { printf "E\x1f%d\x1f%s\n", NR, "a doc-test directive must end on its own line with -->"; next }
          sub(/[ ]*-->[ ]*$/, "", d)
          dkind = d; sub(/[ ].*$/, "", dkind); darg = d; sub(/^[^ ]*[ ]*/, "", darg); dline = NR
          # A bad directive is reported, and the block after it is neither run nor written.
          if (dkind != "skip" && dkind != "file") { printf "E\x1f%d\x1f%s\n", NR, "unknown doc-test directive \"" dkind "\" (skip REASON or file NAME)"; dkind = "bad" }
          else if (darg == "") { printf "E\x1f%d\x1f%s\n", NR, "doc-test: " dkind " needs " (dkind == "skip" ? "a reason" : "a file name"); dkind = "bad" }
          next
        }
        if (line !~ /^[ \t]*$/ && dkind != "") {
          if (dkind != "bad") flush_directive_error("a doc-test directive not followed by a fenced block")
          dkind = ""
        }
        next
      }
      t = line; sub(/^[ ]*/, "", t); sub(/[ \t]+$/, "", t)
      if (substr(t, 1, 1) == substr(fence, 1, 1) && t ~ /^(```+|~~~+)$/ && length(t) >= length(fence)) {
        close(body)
        printf "B\x1f%d\x1f%s\x1f%s\x1f%s\x1f%s\n", start, info, kind, arg, body
        infence = 0
        next
      }
      # Content lines lose the fence'"'"'s own indentation (a block inside a list item).
      for (i = 0; i < fence_indent && substr(line, 1, 1) == " "; i++) line = substr(line, 2)
      print line > body
    }
    END {
      if (infence) printf "E\x1f%d\x1f%s\n", start, "a fenced block that is never closed"
      if (dkind != "" && dkind != "bad") flush_directive_error("a doc-test directive not followed by a fenced block")
    }' "$1"
}

# The bash script of a block on stdout. console: the `$ ` lines (and their `\` continuations); sh: every line.
# After a command written `! command`, a check that it failed (bash's -e ignores a negated command).
script_of() {  # info body
  local info=$1 body=$2 cmd="" cont=0 line
  echo 'trap '"'"'echo "doc test: command failed (exit $?): $BASH_COMMAND" >&2'"'"' ERR'
  emit() {  # one logical command line; check: also check a console command's own status
    printf '%s\n' "$1"
    if [[ $1 =~ ^[[:space:]]*\![[:space:]] ]]; then
      printf '[ $? -eq 0 ] || { echo %q >&2; exit 1; }\n' "doc test: expected to fail, but succeeded: ${1#*! }"
    elif [ "${2:-}" = check ]; then
      printf 'doc_test_status=$?; [ $doc_test_status -eq 0 ] || { echo "doc test: command failed (exit $doc_test_status): "%q >&2; exit $doc_test_status; }\n' "$1"
    fi
  }
  while IFS= read -r line || [ -n "$line" ]; do
    if [ "$info" = console ]; then
      if [ $cont = 1 ]; then cmd+=$'\n'$line
      elif [[ $line == '$ '* ]]; then cmd=${line#'$ '}
      else continue
      fi
    else
      if [ $cont = 1 ]; then cmd+=$'\n'$line; else cmd=$line; fi
    fi
    if [[ $line == *\\ ]]; then cont=1; continue; fi
    cont=0
    if [ "$info" = console ]; then
      printf 'printf "%%s\\n" %q\n' "\$ $cmd"
      emit "$cmd" check
    else
      emit "$cmd"
    fi
  done < "$body"
  [ $cont = 0 ] || emit "$cmd" "$([ "$info" = console ] && echo check)"
}

docs=("$src/README.md")
for f in "$src"/docs/*.md; do [ -e "$f" ] && docs+=("$f"); done

for doc in "${docs[@]}"; do
  rel=${doc#"$src/"}
  parts=$scratch/parts/${rel//\//_}
  mkdir -p "$parts"
  work=$scratch/work/${rel//\//_}
  mkdir -p "$work"
  ln -s "$build" "$work/build"
  for entry in "$src"/* "$src"/.ci; do
    name=${entry##*/}
    case $name in build|build-*|results|'*') continue ;; esac
    [ -e "$entry" ] && [ ! -e "$work/$name" ] && ln -s "$entry" "$work/$name"
  done
  records=$(split_blocks "$doc" "$parts") || { failures+=("$rel: could not be read"); failed=$((failed + 1)); continue; }
  while IFS=$'\x1f' read -r type line a b c d; do
    [ -n "$type" ] || continue
    where="$rel:$line"
    if [ "$type" = E ]; then
      failures+=("$where: $a")
      failed=$((failed + 1))
      continue
    fi
    info=$a directive=$b arg=$c body=$d
    [ "$directive" = bad ] && continue
    if [ "$directive" = file ]; then
      case $arg in /*|..|../*|*/..|*/../*) failures+=("$where: doc-test: file $arg: not a relative name inside the folder"); failed=$((failed + 1)); continue ;; esac
      mkdir -p "$work/$(dirname "$arg")" && cp "$body" "$work/$arg"
      [ "$info" = console ] || [ "$info" = sh ] || continue
    fi
    [ "$info" = console ] || [ "$info" = sh ] || continue
    if [ "$directive" = skip ]; then
      skipped=$((skipped + 1))
      skips+=("$where: $arg")
      continue
    fi
    script=$parts/script.$line.sh
    { echo "cd $(printf %q "$work")"; script_of "$info" "$body"; } > "$script"
    log=$parts/log.$line
    started=$(date +%s)
    (cd "$work" && HOME=$work timeout -k 10 "$timeout_s" bash -eo pipefail "$script") > "$log" 2>&1 < /dev/null
    rc=$?
    run=$((run + 1))
    took=$(( $(date +%s) - started ))
    if [ $rc -eq 0 ]; then
      echo "ok   $where ($info, ${took} s)"
    else
      why="exit $rc"
      [ $rc -eq 124 ] && why="timed out after $timeout_s s"
      echo "FAIL $where ($info, $why, ${took} s); its output:"
      sed 's/^/    /' "$log" | tail -n 200
      failures+=("$where: $why")
      failed=$((failed + 1))
    fi
  done <<< "$records"
done

for s in "${skips[@]}"; do echo "skipped $s"; done
for f in "${failures[@]}"; do echo "failed  $f"; done
echo "doc test: $run blocks run, $skipped skipped (with reasons), $failed failed"
[ $failed -eq 0 ]
