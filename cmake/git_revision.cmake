# Run at every build (the fanout_git_revision target): writes the source tree's git revision, with "-dirty" when
# tracked files differ from it, into generated/git_revision.cpp, only when it changed (configure_file leaves an
# unchanged file alone). Taken at configure time before 2026-12-06, a build after later commits named an old one.
#   cmake -DSRC=<source dir> -DOUT=<file> -P git_revision.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE FANOUT_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT FANOUT_GIT_REVISION)
  set(FANOUT_GIT_REVISION "unknown")
else()
  # --no-optional-locks: no refresh of .git/index (and no index.lock) beside the user's own git commands.
  execute_process(COMMAND git --no-optional-locks status --porcelain --untracked-files=no WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE changed OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changed)
    string(APPEND FANOUT_GIT_REVISION "-dirty")
  endif()
endif()
file(WRITE "${OUT}.in" "// Generated at build time by cmake/git_revision.cmake.\n#include \"common/git_revision.h\"\n\nnamespace fanout {\nconst char* git_revision() { return \"@FANOUT_GIT_REVISION@\"; }\n}  // namespace fanout\n")
configure_file("${OUT}.in" "${OUT}" @ONLY)
