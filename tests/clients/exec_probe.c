/* exec_probe: a tiny C program for the exec plugin's tests (tests/exec_test.cpp). Its output is fixed by its
 * arguments, so the test knows every sample it must find:
 *   stdout:  "iteration <i> latency: <v> us" with v = 10 * (size + i)           (regex, iteration and unit groups)
 *   stderr:  {"metric":"ops","value":<1000 + i>,"unit":"ops/s","iteration":<i>}  (jsonl)
 *   probe_<rank>.csv in its folder: iteration,bytes,seconds rows, bytes = size, seconds = 0.5 * (i + 1)  (csv)
 *   rank_<rank>_timing.csv: <rank>,compute,<0.25 * (i + 1)> lines                   (smartsim-timing)
 *   env.<rank>: the FANOUT_* variables and PROBE_* ones it was given, NAME=value per line
 * Usage: exec_probe SIZE ITERATIONS [EXIT_STATUS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: exec_probe SIZE ITERATIONS [EXIT_STATUS]\n");
    return 2;
  }
  const long size = atol(argv[1]), iterations = atol(argv[2]);
  const char* rank_text = getenv("FANOUT_RANK");
  const long rank = rank_text ? atol(rank_text) : 0;
  char name[64];
  snprintf(name, sizeof name, "probe_%ld.csv", rank);
  FILE* csv = fopen(name, "w");
  snprintf(name, sizeof name, "rank_%ld_timing.csv", rank);
  FILE* timing = fopen(name, "w");
  snprintf(name, sizeof name, "env.%ld", rank);
  FILE* env = fopen(name, "w");
  if (!csv || !timing || !env) {
    perror("exec_probe: cannot write in its folder");
    return 1;
  }
  fprintf(csv, "iteration,bytes,seconds\n");
  for (long i = 0; i < iterations; ++i) {
    printf("iteration %ld latency: %ld us\n", i, 10 * (size + i));
    fprintf(stderr, "{\"metric\":\"ops\",\"value\":%ld,\"unit\":\"ops/s\",\"iteration\":%ld}\n", 1000 + i, i);
    fprintf(csv, "%ld,%ld,%g\n", i, size, 0.5 * (double)(i + 1));
    fprintf(timing, "%ld,compute,%g\n", rank, 0.25 * (double)(i + 1));
  }
  for (char** e = environ; *e; ++e)
    if (strncmp(*e, "FANOUT_", 7) == 0 || strncmp(*e, "PROBE_", 6) == 0) fprintf(env, "%s\n", *e);
  fclose(csv), fclose(timing), fclose(env);
  if (argc > 3 && atoi(argv[3]) != 0) {
    fprintf(stderr, "exec_probe: failing with status %s as asked\n", argv[3]);
    return atoi(argv[3]);
  }
  return 0;
}
