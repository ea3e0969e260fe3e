#include "control_channel.h"

#include "fanout_sdk.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace parameter_serving {

void ControlServer::poll_messages(int timeout_ms, std::vector<ControlMessage>& out) {
  for (const auto& event : gate_.poll(timeout_ms)) {
    auto& c = gate_.conn(event.conn);
    if (!c.authed) {
      if (c.in.size() < kTokenBytes) {
        if (event.eof) gate_.refuse(event.conn);  // connected and left without the token
        continue;
      }
      if (!fanout_sdk::token_matches(c.in.substr(0, kTokenBytes), token_)) {
        gate_.refuse(event.conn);
        continue;
      }
      c.authed = true;
      c.in.erase(0, kTokenBytes);
    }
    bool forged = false;
    while (!forged && c.in.size() >= sizeof(ControlMessage)) {
      ControlMessage m;
      std::memcpy(&m, c.in.data(), sizeof m);
      c.in.erase(0, sizeof m);
      const bool first_hello = m.type == kHello && c.peer < 0;
      forged = !first_hello && !(m.type == kPost && int64_t(m.worker) == c.peer);
      if (forged) break;
      if (first_hello) c.peer = m.worker, ++hellos_;
      out.push_back(m);
    }
    if (forged) gate_.refuse(event.conn);
    else if (event.eof) gate_.close(event.conn);
  }
}

void ControlServer::send_done() {
  for (size_t i = 0; i < gate_.size(); ++i) (void)gate_.send(i, &kDone, 1);
}

ControlClient::ControlClient(const std::string& ip, int port, const std::string& token, int timeout_ms) {
  try {
    fd_ = fanout_sdk::tcp_connect(ip, port, timeout_ms);  // retried: the listener exists before its address is out
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("cannot reach the trainer: ") + e.what());
  }
  fanout_sdk::set_nodelay(fd_);
  if (token.size() != kTokenBytes || !fanout_sdk::send_all(fd_, token.data(), token.size()))
    throw fanout_sdk::errno_error("present the job's token to the trainer");
}

ControlClient::~ControlClient() { close(); }

void ControlClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ControlClient::send(const ControlMessage& m) {
  if (fanout_sdk::send_all(fd_, &m, sizeof m) || done_) return;  // after DONE the trainer may be gone: nothing to tell
  throw fanout_sdk::errno_error("post to the trainer");
}

bool ControlClient::trainer_done() {
  if (done_) return true;
  char c;
  ssize_t n = recv(fd_, &c, 1, MSG_DONTWAIT);
  if (n == 1 || n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) done_ = true;
  return done_;
}

}  // namespace parameter_serving
