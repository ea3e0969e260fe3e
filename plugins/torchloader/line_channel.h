// The torchloader cluster's transport: text lines over TCP (one message per line, words separated by spaces).
// The Master listens (LineServer); each node's Worker/Application Master connects (LineClient). Lines are short
// control messages (LAUNCH, PAUSE, HB, ...), so a readable protocol costs nothing and is easy to trace.
#pragma once
#include <string>
#include <vector>

#include "fanout_gate.hpp"

namespace torchloader {

struct Line {
  int conn;             // which connection (LineServer), or 0
  std::string text;     // without the newline
  bool closed = false;  // the connection ended (text empty): out of band, so no peer's line can fake it
};

// Every connection's first line must be "AUTH <token>" (the job's channel token, fanout_sdk::channel_token):
// until then nothing it sends is delivered; a wrong or malformed first line closes it, counted in refused().
class LineServer {
 public:
  LineServer(const std::string& bind_ip, std::string token) : token_(std::move(token)), gate_(bind_ip, 64) {}  // an ephemeral port
  int port() const { return gate_.port(); }
  // Accepts new connections and reads what arrived, for up to timeout_ms. A peer's connection that ended
  // yields a Line with closed set.
  std::vector<Line> poll(int timeout_ms);
  bool send(int conn, const std::string& text);  // false when that connection is gone
  size_t refused() const { return gate_.refused(); }

 private:
  std::string token_;
  fanout_sdk::GatedServer gate_;  // index = connection id
};

class LineClient {
 public:
  // Connects, retrying until timeout_ms (the master may still be starting), and presents the token.
  LineClient(const std::string& host_port, const std::string& token, int timeout_ms);
  ~LineClient();
  LineClient(const LineClient&) = delete;
  LineClient& operator=(const LineClient&) = delete;
  bool send(const std::string& text);  // thread-safe
  // Complete lines that arrived within timeout_ms; `closed` is set once the master went away.
  std::vector<std::string> poll(int timeout_ms, bool& closed);

 private:
  int fd_ = -1;
  std::string in_;
  struct SendLock;
  SendLock* lock_;
};

// "WORD a b c" -> {"WORD", "a", "b", "c"}
std::vector<std::string> words(const std::string& line);

}  // namespace torchloader
