/* A program of known cost, for the resource.* figures (issue 54): each mode does one thing whose cost the kernel
 * counts exactly, and says what it did.
 *   mem N          allocate N MiB and touch every page, then exit
 *   child N        fork a child that does `mem N`; wait for it (the parent itself stays small)
 *   cpu MS         spin until this process has used MS ms of CPU; print cpu_s=<its own CPU time, user + system>
 *   sleep MS       sleep MS ms (no CPU to speak of)
 *   write N FILE   write N MiB to FILE in 1 MiB blocks, fsync, close
 *   slurm N MS     inside a Slurm step: spin MS ms of CPU, touch N MiB, then ask sstat for the step's MaxRSS until
 *                  it shows them (sstat makes the step's slurmd sample it then: Slurm's own accounting has seen the
 *                  peak, whatever its sampling period); print cpu_s= and slurm_seen=<bytes> */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static volatile char* touched;

static int touch(long mib) {
  const size_t bytes = (size_t)mib << 20;
  volatile char* p = malloc(bytes);
  if (!p) return 1;
  for (size_t i = 0; i < bytes; i += 4096) p[i] = (char)i;
  touched = p;
  printf("touched=%ld\n", mib);
  return 0;
}

static void spin(long ms) {
  volatile double sink = 0;
  while (cpu_s() < (double)ms / 1000.0)
    for (int i = 0; i < 10000; ++i) sink += i * 0.5;
}

/* The step's MaxRSS as sstat says it now, in bytes (-1 when it says nothing). */
static long long sstat_max_rss(void) {
  const char* job = getenv("SLURM_JOB_ID");
  const char* step = getenv("SLURM_STEP_ID");
  if (!job || !step) return -1;
  char id[64];
  snprintf(id, sizeof id, "%s.%s", job, step);
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execlp("sstat", "sstat", "--noheader", "--parsable2", "--noconvert", "--format=MaxRSS", "-j", id, (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[256] = {0};
  ssize_t got = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  waitpid(pid, NULL, 0);
  return got > 0 && buf[0] >= '0' && buf[0] <= '9' ? atoll(buf) : -1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: resource_probe mem|child|cpu|sleep N | write N FILE\n");
    return 2;
  }
  const long n = atol(argv[2]);
  if (!strcmp(argv[1], "mem")) return touch(n);
  if (!strcmp(argv[1], "child")) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(touch(n));
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  if (!strcmp(argv[1], "slurm") && argc > 3) {
    spin(atol(argv[3]));
    printf("cpu_s=%.6f\n", cpu_s());
    if (touch(n)) return 1;
    long long seen = -1;
    for (int tries = 0; tries < 600 && seen < (n << 20); ++tries) {  /* a readiness check, bounded at about a minute */
      seen = sstat_max_rss();
      if (seen < (n << 20)) {
        struct timespec t = {0, 100000000L};
        nanosleep(&t, NULL);
      }
    }
    printf("slurm_seen=%lld\n", seen);
    return seen >= (n << 20) ? 0 : 3;
  }
  if (!strcmp(argv[1], "cpu")) {
    spin(n);
    printf("cpu_s=%.6f\n", cpu_s());
    return 0;
  }
  if (!strcmp(argv[1], "sleep")) {
    struct timespec t = {n / 1000, (n % 1000) * 1000000L};
    nanosleep(&t, NULL);
    return 0;
  }
  if (!strcmp(argv[1], "write") && argc > 3) {
    int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    static char block[1 << 20];
    memset(block, 'x', sizeof block);
    for (long i = 0; i < n; ++i)
      if (write(fd, block, sizeof block) != (ssize_t)sizeof block) return 1;
    if (fsync(fd) != 0 || close(fd) != 0) return 1;
    printf("written=%ld\n", n);
    return 0;
  }
  fprintf(stderr, "resource_probe: unknown mode %s\n", argv[1]);
  return 2;
}
