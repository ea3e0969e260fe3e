#include "tensor_wire.h"

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace smartsim {

namespace {

[[noreturn]] void io_failed(const char* what, ssize_t n) {
  if (n == 0) throw WireError(std::string(what) + ": the database closed the connection");
  if (errno == EAGAIN || errno == EWOULDBLOCK) throw WireError(std::string(what) + ": timed out");
  throw WireError(std::string(what) + ": " + std::strerror(errno));
}

void append_bulk_header(std::string& out, size_t len) {
  out += '$';
  out += std::to_string(len);
  out += "\r\n";
}

// Buffered reads off the socket; read_into() takes what is buffered, then reads straight into the destination.
class SocketReader {
 public:
  explicit SocketReader(int fd) : fd_(fd) {}
  char get() {
    if (pos_ == len_) fill();
    return buf_[pos_++];
  }
  bool buffered() const { return pos_ != len_; }
  std::string line() {  // up to "\r\n", without it
    std::string s;
    for (char c; (c = get()) != '\r';) {
      s += c;
      if (s.size() > 1024) throw WireError("AI.TENSORGET: a reply line longer than 1024 bytes");
    }
    if (get() != '\n') throw WireError("AI.TENSORGET: malformed reply (CR without LF)");
    return s;
  }
  void read_into(char* dst, size_t n) {  // dst == nullptr: drop
    size_t take = std::min(n, len_ - pos_);
    if (dst) std::memcpy(dst, buf_ + pos_, take);
    pos_ += take;
    for (size_t done = take; done < n;) {
      if (!dst) {
        fill();
        size_t t = std::min(n - done, len_);
        pos_ = t;
        done += t;
        continue;
      }
      ssize_t got = ::read(fd_, dst + done, n - done);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        io_failed("AI.TENSORGET", got);
      }
      done += size_t(got);
    }
  }

 private:
  void fill() {
    for (;;) {
      ssize_t got = ::read(fd_, buf_, sizeof buf_);
      if (got > 0) {
        pos_ = 0;
        len_ = size_t(got);
        return;
      }
      if (got < 0 && errno == EINTR) continue;
      io_failed("AI.TENSORGET", got);
    }
  }
  int fd_;
  char buf_[16384];
  size_t pos_ = 0, len_ = 0;
};

long long count(const std::string& line, const char* what) {
  char* end = nullptr;
  long long v = std::strtoll(line.c_str(), &end, 10);
  if (line.empty() || *end || v < 0) throw WireError(std::string("AI.TENSORGET: malformed ") + what + " '" + line + "'");
  return v;
}

// A simple string or a short bulk string (RedisAI answers the field names and dtype as either).
std::string text(SocketReader& in) {
  char type = in.get();
  if (type == '+') return in.line();
  if (type != '$') throw WireError(std::string("AI.TENSORGET: expected a string in the reply, got '") + type + "'");
  long long n = count(in.line(), "length");
  if (n > 1024) throw WireError("AI.TENSORGET: a " + std::to_string(n) + "-byte field");
  std::string s(size_t(n), '\0');
  in.read_into(s.data(), s.size());
  if (!in.line().empty()) throw WireError("AI.TENSORGET: malformed bulk string");
  return s;
}

long long after(SocketReader& in, char type, const char* what) {
  char got = in.get();
  if (got != type) throw WireError(std::string("AI.TENSORGET: expected '") + type + "' for the " + what + ", got '" + got + "'");
  return count(in.line(), what);
}

void expect_field(SocketReader& in, const char* name) {
  if (text(in) != name) throw WireError(std::string("AI.TENSORGET: expected field '") + name + "'");
}

}  // namespace

void send_with_payload(redisContext* c, const std::vector<const char*>& argv, const std::vector<size_t>& lens) {
  if (sdslen(c->obuf) != 0) throw WireError(std::string(argv[0]) + ": the connection has unsent data");
  std::string head = "*" + std::to_string(argv.size()) + "\r\n";
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    append_bulk_header(head, lens[i]);
    head.append(argv[i], lens[i]);
    head += "\r\n";
  }
  append_bulk_header(head, lens.back());
  static const char crlf[] = "\r\n";
  iovec iov[3] = {{head.data(), head.size()}, {const_cast<char*>(argv.back()), lens.back()}, {const_cast<char*>(crlf), 2}};
  for (size_t first = 0; first < 3;) {
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = 3 - first;
    ssize_t n = ::sendmsg(c->fd, &msg, MSG_NOSIGNAL);  // a closed connection is an error here, not SIGPIPE
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      io_failed(argv[0], n);
    }
    size_t left = size_t(n);
    while (first < 3 && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < 3) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
}

std::string read_tensor_reply(redisContext* c, TensorMeta& meta, const std::function<char*(const TensorMeta&)>& destination) {
  if (c->reader->pos != c->reader->len) throw WireError("AI.TENSORGET: the connection has unread data");
  SocketReader in(c->fd);
  char type = in.get();
  if (type == '-') {  // an error reply; an empty one must still read as an error, never as "" (a tensor)
    std::string error = in.line();
    return error.empty() ? "ERR (the database sent an empty error)" : error;
  }
  if (type != '*' || count(in.line(), "reply length") != 6) throw WireError("AI.TENSORGET: unexpected reply (not dtype, shape, blob)");
  expect_field(in, "dtype");
  meta.dtype = text(in);
  expect_field(in, "shape");
  const long long rank = after(in, '*', "shape");
  if (rank > 64) throw WireError("AI.TENSORGET: a shape of " + std::to_string(rank) + " dimensions");
  meta.dims.resize(size_t(rank));
  for (auto& d : meta.dims) d = size_t(after(in, ':', "dimension"));
  expect_field(in, "blob");
  meta.bytes = size_t(after(in, '$', "blob length"));
  in.read_into(destination(meta), meta.bytes);
  if (!in.line().empty()) throw WireError("AI.TENSORGET: malformed blob");
  if (in.buffered()) throw WireError("AI.TENSORGET: the database sent more than its reply");
  return "";
}

}  // namespace smartsim
