/* A stand-in for ps-lite's tests/test_kv_app_benchmark, of the same shape, for docs/exec.md's doc test of the
 * original's experiment file (the original is fetched code, built and run during development only). Like the
 * original: one program, three roles chosen by DMLC_ROLE (scheduler, server, worker); every node meets at the
 * scheduler on DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT; DMLC_NUM_SERVER servers and DMLC_NUM_WORKER workers; each
 * worker pushes and pulls a vector of argv[1] floats (default 1,000,000) to every server argv[2] times (default 10)
 * and prints to stderr, as ps-lite's benchmark does, "Push average time cost: <ms>ms" and "Pull average time cost:
 * <ms>ms"; then every node passes the scheduler's final barrier and all end together, status 0 (ps-lite's
 * Finalize). A node whose peer goes away ends with status 1, naming it, rather than waiting forever.
 *
 * Its wire is its own (a line to register, then length-prefixed values), not ps-lite's ZeroMQ protocol: what the
 * doc test checks is how fanout runs such a program (three steps that end together, the environment, the parsed
 * stderr), not ps-lite's transport. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char* what) {
  fprintf(stderr, "pslite_standin (%s): %s\n", getenv("DMLC_ROLE") ? getenv("DMLC_ROLE") : "?", what);
  exit(1);
}

static int env_int(const char* name) {
  const char* v = getenv(name);
  if (!v || !*v) {
    fprintf(stderr, "pslite_standin: %s is not set\n", name);
    exit(1);
  }
  return atoi(v);
}

static void send_all(int fd, const void* p, size_t n) {
  const char* c = p;
  while (n) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) die("a peer went away while sending");
    c += k, n -= (size_t)k;
  }
}

static void recv_all(int fd, void* p, size_t n) {
  char* c = p;
  while (n) {
    ssize_t k = recv(fd, c, n, 0);
    if (k <= 0) die("a peer went away while receiving");
    c += k, n -= (size_t)k;
  }
}

static void send_u32(int fd, uint32_t v) {
  v = htonl(v);
  send_all(fd, &v, 4);
}
static uint32_t recv_u32(int fd) {
  uint32_t v;
  recv_all(fd, &v, 4);
  return ntohl(v);
}

static int listen_on(int port, int* bound) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET, a.sin_port = htons((uint16_t)port), a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, 64) != 0) die("cannot listen");
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr*)&a, &len);
  if (bound) *bound = ntohs(a.sin_port);
  return fd;
}

static int connect_to(const char* host, int port) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_INET, hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, service, &hints, &res) != 0) die("cannot resolve DMLC_PS_ROOT_URI");
  /* The scheduler may not listen yet (ps-lite retries too): a few seconds of attempts. */
  for (int attempt = 0; attempt < 300; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      freeaddrinfo(res);
      return fd;
    }
    close(fd);
    struct timespec t = {0, 20 * 1000 * 1000};
    nanosleep(&t, NULL);
  }
  die("cannot reach the scheduler");
  return -1;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The scheduler: every node registers ('S' + its port, or 'W'); workers get the servers' addresses; then one
 * barrier at the end: once every worker says it is done, every node is told to end. */
static int scheduler(int servers, int workers) {
  int lfd = listen_on(env_int("DMLC_PS_ROOT_PORT"), NULL);
  const int n = servers + workers;
  int* fds = calloc((size_t)n, sizeof(int));
  char* kind = calloc((size_t)n, 1);
  uint32_t* addr = calloc((size_t)n, 4);
  uint32_t* port = calloc((size_t)n, 4);
  int s = 0;
  for (int i = 0; i < n; ++i) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    fds[i] = accept(lfd, (struct sockaddr*)&a, &len);
    if (fds[i] < 0) die("accept failed");
    /* A connection that closes before it registers is no node (a readiness probe of the port): not counted. */
    if (recv(fds[i], &kind[i], 1, 0) != 1) {
      close(fds[i]);
      --i;
      continue;
    }
    if (kind[i] == 'S') addr[i] = a.sin_addr.s_addr, port[i] = recv_u32(fds[i]), ++s;
  }
  if (s != servers) die("registrations do not match DMLC_NUM_SERVER");
  for (int i = 0; i < n; ++i)
    if (kind[i] == 'W') {
      send_u32(fds[i], (uint32_t)servers);
      for (int j = 0; j < n; ++j)
        if (kind[j] == 'S') send_all(fds[i], &addr[j], 4), send_u32(fds[i], port[j]);
    }
  for (int i = 0; i < n; ++i)
    if (kind[i] == 'W') recv_u32(fds[i]); /* done */
  for (int i = 0; i < n; ++i) send_u32(fds[i], 0); /* end */
  return 0;
}

/* A server: takes each worker's pushes (values in, a 4-byte ack out) and pulls (a length in, the values out) until
 * the scheduler says to end. Every worker is served at once, as ps-lite's server does: one worker at a time
 * deadlocked two workers against two servers that had each taken a different worker first (each worker waited for
 * the ack of the server serving the other). */
static int server(int workers) {
  int bound = 0, lfd = listen_on(0, &bound);
  int sched = connect_to(getenv("DMLC_PS_ROOT_URI"), env_int("DMLC_PS_ROOT_PORT"));
  send_all(sched, "S", 1);
  send_u32(sched, (uint32_t)bound);
  struct pollfd* fds = calloc((size_t)workers, sizeof(struct pollfd));
  float** stores = calloc((size_t)workers, sizeof(float*));
  for (int w = 0; w < workers; ++w) {
    int one = 1;
    fds[w].fd = accept(lfd, NULL, NULL);
    if (fds[w].fd < 0) die("accept failed");
    fds[w].events = POLLIN;
    setsockopt(fds[w].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  for (int open = workers; open > 0;) {
    if (poll(fds, (nfds_t)workers, -1) < 0) die("poll failed");
    for (int w = 0; w < workers; ++w) {
      if (fds[w].fd < 0 || !(fds[w].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int fd = fds[w].fd;
      const uint32_t op = recv_u32(fd), count = recv_u32(fd);
      if (op == 0) { /* this worker is done */
        close(fd);
        fds[w].fd = -1;
        --open;
        continue;
      }
      stores[w] = realloc(stores[w], (size_t)count * sizeof(float));
      if (op == 1) recv_all(fd, stores[w], (size_t)count * sizeof(float)), send_u32(fd, count);
      else send_all(fd, stores[w], (size_t)count * sizeof(float));
    }
  }
  for (int w = 0; w < workers; ++w) free(stores[w]);
  recv_u32(sched); /* the final barrier */
  return 0;
}

static int worker(int len, int repeat) {
  int sched = connect_to(getenv("DMLC_PS_ROOT_URI"), env_int("DMLC_PS_ROOT_PORT"));
  send_all(sched, "W", 1);
  const int servers = (int)recv_u32(sched);
  int* fds = calloc((size_t)servers, sizeof(int));
  for (int i = 0; i < servers; ++i) {
    uint32_t a, p;
    recv_all(sched, &a, 4);
    p = recv_u32(sched);
    char host[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, host, sizeof host);
    fds[i] = connect_to(host, (int)p);
  }
  float* values = malloc((size_t)len * sizeof(float));
  for (int i = 0; i < len; ++i) values[i] = (float)i;
  double push = 0, pull = 0;
  for (int r = 0; r < repeat; ++r) {
    double t = now_ms();
    for (int i = 0; i < servers; ++i) send_u32(fds[i], 1), send_u32(fds[i], (uint32_t)len), send_all(fds[i], values, (size_t)len * sizeof(float));
    for (int i = 0; i < servers; ++i) recv_u32(fds[i]);
    push += now_ms() - t;
    t = now_ms();
    for (int i = 0; i < servers; ++i) send_u32(fds[i], 2), send_u32(fds[i], (uint32_t)len);
    for (int i = 0; i < servers; ++i) recv_all(fds[i], values, (size_t)len * sizeof(float));
    pull += now_ms() - t;
  }
  fprintf(stderr, "Push average time cost: %fms\n", push / repeat);
  fprintf(stderr, "Pull average time cost: %fms\n", pull / repeat);
  for (int i = 0; i < servers; ++i) send_u32(fds[i], 0), send_u32(fds[i], 0);
  send_u32(sched, 1);
  recv_u32(sched); /* the final barrier */
  return 0;
}

int main(int argc, char** argv) {
  const char* role = getenv("DMLC_ROLE");
  if (!role) die("DMLC_ROLE is not set (scheduler, server or worker)");
  const int servers = env_int("DMLC_NUM_SERVER"), workers = env_int("DMLC_NUM_WORKER");
  if (!strcmp(role, "scheduler")) return scheduler(servers, workers);
  if (!strcmp(role, "server")) return server(workers);
  if (!strcmp(role, "worker")) return worker(argc > 1 ? atoi(argv[1]) : 1000000, argc > 2 ? atoi(argv[2]) : 10);
  die("DMLC_ROLE must be scheduler, server or worker");
  return 1;
}
