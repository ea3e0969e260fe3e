// The plain-socket anchor for ps-lite's figures: what one TCP connection on loopback carries when a program sends
// the same messages fanout-pslite sends (a 40-byte header, then the value, one sendmsg of two iovecs per message,
// TCP_NODELAY) and the receiver reads each header and then the value into place, with no protocol
// around it: no keys, no acknowledgements, no event loop. Two processes, as ps-lite's worker and server are.
//   tcp_anchor stream <value bytes> <messages> [values]   one direction: prints "Application goodput: X Gbit/s"
//   tcp_anchor bidir  <value bytes> <messages> [values]   both directions at once, both counted: the same line, summed
//   tcp_anchor rtt    <value bytes> <round trips> [1 [seconds]]   a value out, a header back (a synchronous push's
//                                                         shape): p50/p99 us; with `seconds`, round trips go on until
//                                                         that much time has passed too (as long as the measurement
//                                                         it anchors: a p99 of a 10 ms run is one scheduler event)
// `values` (default 1): how many distinct values each side sends from and reads into, in turn, as a ps-lite worker
// and server do with their keys' values (40 keys of 4 MiB are 160 MiB that no cache holds; one 4 MiB value is
// read again from the cache). They are allocated and touched before the clock starts, on both sides.
// The gap between fanout-pslite and this is ps-lite's own cost; the gap between this and iperf3 is the message
// shape's (a header per value, reads sized by it).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kHeaderBytes = 40;  // plugins/pslite/wire.h
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void write_all(int fd, const void* header, const void* value, size_t len) {
  iovec iov[2] = {{const_cast<void*>(header), kHeaderBytes}, {const_cast<void*>(value), len}};
  int n = len ? 2 : 1;
  iovec* v = iov;
  while (n > 0) {
    msghdr m{};
    m.msg_iov = v;
    m.msg_iovlen = size_t(n);
    ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      die("sendmsg");
    }
    while (n > 0 && size_t(w) >= v->iov_len) w -= ssize_t(v->iov_len), ++v, --n;
    if (n > 0) v->iov_base = static_cast<char*>(v->iov_base) + w, v->iov_len -= size_t(w);
  }
}

bool read_all(int fd, void* to, size_t len) {
  char* p = static_cast<char*>(to);
  while (len > 0) {
    ssize_t r = read(fd, p, len);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      die("read");
    }
    p += r, len -= size_t(r);
  }
  return true;
}

void no_delay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// `count` values of `len` bytes each, every page written (no page fault left for the timed part).
std::vector<std::vector<char>> make_values(size_t len, long count) {
  return std::vector<std::vector<char>>(size_t(count), std::vector<char>(std::max<size_t>(len, 1), 'v'));
}

// Sends `messages` header+value messages from the values in turn; the header's first 8 bytes carry the length.
void send_messages(int fd, size_t len, long messages, const std::vector<std::vector<char>>& values) {
  unsigned char header[kHeaderBytes] = {};
  std::memcpy(header, &len, sizeof len);
  for (long i = 0; i < messages; ++i) write_all(fd, header, values[size_t(i) % values.size()].data(), len);
}

// Reads messages until the peer closes: each header, then its value into the values in turn. Returns the value bytes.
uint64_t receive_messages(int fd, std::vector<std::vector<char>>& values) {
  unsigned char header[kHeaderBytes];
  uint64_t bytes = 0;
  for (size_t i = 0; read_all(fd, header, kHeaderBytes); ++i) {
    size_t len = 0;
    std::memcpy(&len, header, sizeof len);
    std::vector<char>& into = values[i % values.size()];
    if (len > into.size() || !read_all(fd, into.data(), len)) die("a value larger than announced, or cut short");
    bytes += len;
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr, "usage: tcp_anchor stream|bidir|rtt <value bytes> <messages or round trips> [values [rtt seconds]]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const size_t len = std::strtoull(argv[2], nullptr, 10);
  const long count = std::atol(argv[3]), distinct = argc >= 5 ? std::atol(argv[4]) : 1;
  const double min_seconds = argc == 6 ? std::atof(argv[5]) : 0;
  if ((mode != "stream" && mode != "bidir" && mode != "rtt") || count < 1 || distinct < 1 || min_seconds < 0 ||
      (argc == 6 && mode != "rtt"))
    return std::fprintf(stderr, "tcp_anchor: bad arguments\n"), 2;

  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || listen(listener, 1) < 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&a), &alen) < 0)
    die("listen");

  const pid_t server = fork();
  if (server < 0) die("fork");
  if (server == 0) {  // the receiving side ("server"): echoes a header per value in rtt, sends too in bidir
    int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) die("accept");
    no_delay(fd);
    std::vector<std::vector<char>> values = make_values(len, mode == "rtt" ? 1 : distinct);
    if (write(fd, "r", 1) != 1) die("write");  // ready: the client's clock starts once this side's values are made
    if (mode == "rtt") {
      unsigned char header[kHeaderBytes];
      while (read_all(fd, header, kHeaderBytes)) {
        if (!read_all(fd, values[0].data(), len)) break;
        unsigned char ack[kHeaderBytes] = {};
        write_all(fd, ack, nullptr, 0);
      }
    } else if (mode == "bidir") {
      std::vector<std::vector<char>> outgoing = make_values(len, distinct);
      std::thread out([&] {
        send_messages(fd, len, count, outgoing);
        shutdown(fd, SHUT_WR);
      });
      receive_messages(fd, values);
      out.join();
    } else {
      receive_messages(fd, values);
    }
    _exit(0);
  }
  close(listener);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) die("connect");
  no_delay(fd);
  std::vector<std::vector<char>> values = make_values(len, mode == "rtt" ? 1 : distinct), incoming;
  if (mode == "bidir") incoming = make_values(len, distinct);
  char ready;
  if (read(fd, &ready, 1) != 1) die("the server is not ready");

  const auto t0 = Clock::now();
  if (mode == "rtt") {
    std::vector<double> us;
    unsigned char header[kHeaderBytes] = {};
    std::memcpy(header, &len, sizeof len);
    const std::vector<char>& value = values[0];
    const long warmup = std::min<long>(count / 10 + 1, 1000);  // run and not counted
    Clock::time_point measured_from{};
    for (long i = -warmup; i < count || std::chrono::duration<double>(Clock::now() - measured_from).count() < min_seconds; ++i) {
      if (i == 0) measured_from = Clock::now();
      const auto s = Clock::now();
      write_all(fd, header, value.data(), len);
      unsigned char ack[kHeaderBytes];
      if (!read_all(fd, ack, kHeaderBytes)) die("the server closed");
      if (i >= 0) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
    }
    std::sort(us.begin(), us.end());
    auto pct = [&](double p) { return us[std::min(us.size() - 1, size_t(p * double(us.size())))]; };
    std::printf("rtt of %zu-byte values with a header back: p50 %.2f us p99 %.2f us over %zu round trips in %.3f s (%ld warmup not counted)\n",
                len, pct(0.50), pct(0.99), us.size(), std::chrono::duration<double>(Clock::now() - measured_from).count(), warmup);
    close(fd);
  } else {
    uint64_t received = 0;
    if (mode == "bidir") {
      std::thread in([&] { received = receive_messages(fd, incoming); });
      send_messages(fd, len, count, values);
      shutdown(fd, SHUT_WR);
      in.join();
    } else {
      send_messages(fd, len, count, values);
      shutdown(fd, SHUT_WR);
      char c;
      while (read(fd, &c, 1) > 0) {  // until the server has read everything and closed
      }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double bytes = double(len) * double(count) + double(received);
    std::printf("Application goodput: %.4f Gbit/s (%s, %zu-byte values, %ld messages%s)\n", bytes * 8 / s / 1e9, mode.c_str(), len, count,
                mode == "bidir" ? " each way, both directions counted" : "");
    close(fd);
  }
  int st = 0;
  waitpid(server, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
