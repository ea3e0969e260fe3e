// A connection between two ps-lite nodes, whatever carries it: TCP (any two hosts) or a shared-memory ring
// pair (two processes on one host, found by the kernel's boot id). Sending is one gathered message
// (header + payload) and thread-safe; receiving is non-blocking reads that an Inbound parser turns into
// messages, with the payload read straight into the buffer the receiver chooses.
#pragma once
#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wire.h"

namespace pslite {

class Link {
 public:
  virtual ~Link() = default;
  // Sends one message; blocks until it is handed to the transport. Thread-safe. Throws std::runtime_error.
  virtual void send(const Header& h, const void* payload) = 0;
  // Sends several messages in order; the payloads need only live until it returns. By default one send() each; a
  // transport that can hands them to the kernel together (a worker's request of 40 keys: one sendmsg, not 40).
  struct Outgoing {
    Header header;
    const void* payload;
  };
  virtual void send_batch(const std::vector<Outgoing>& messages) {
    for (const Outgoing& m : messages) send(m.header, m.payload);
  }
  // Reads up to cap bytes without blocking: > 0 bytes read, 0 nothing available, -1 the peer is gone.
  virtual ssize_t read_some(void* buf, size_t cap) = 0;
  // Waits up to timeout_ms until read_some may return something (data, or the peer's end).
  virtual void wait_readable(int timeout_ms) = 0;
  // A descriptor epoll can watch for the link's input, or -1 when the link is waited on with wait_readable.
  virtual int poll_fd() const = 0;
  virtual std::string describe() const = 0;
  // Makes later and blocked reads return -1 (the peer sees the connection close).
  virtual void close() = 0;
  // While held, small messages (a header, or a header and a short value: a server's acks) are gathered and go out
  // together when the hold ends: one send and one wake-up of the peer for every reply to one batch of input,
  // instead of one each (a push of 40 keys was 40 sendmsg calls and as many wake-ups of the worker). Larger
  // messages send what is gathered first, so the order holds. A transport that gains nothing ignores it.
  virtual void hold_small_sends(bool /*hold*/) {}
  uint32_t peer_id = 0;
};

// A connected TCP socket (made non-blocking, TCP_NODELAY).
std::unique_ptr<Link> tcp_link(int fd, const std::string& peer);
// Connects to host:port, retrying refused connections until timeout_ms.
int tcp_connect(const std::string& host, int port, int timeout_ms);
// Listens on host (port 0: any); returns the socket and the port.
int tcp_listen(const std::string& host, int port, int& bound_port);

// Shared memory: the connecting side creates a segment (its name goes to the peer in Hello), the accepting
// side opens it, and the name is removed once both have it mapped. The TCP `control` link stays open beside
// the rings so that either side notices the other's death.
class ShmSegment;
std::shared_ptr<ShmSegment> create_shm_segment(size_t ring_bytes);  // ring_bytes per direction
std::shared_ptr<ShmSegment> open_shm_segment(const std::string& name);
const std::string& shm_segment_name(const ShmSegment& s);
void unlink_shm_segment(const ShmSegment& s);
// creator: the side that made the segment (it writes ring 0).
std::unique_ptr<Link> shm_link(std::unique_ptr<Link> control, std::shared_ptr<ShmSegment> segment, bool creator);

// This host's identity for co-location: the kernel's boot id (same kernel, same memory).
std::string host_identity();

// Turns a link's bytes into messages. on_header returns where the payload goes (nullptr: discard it);
// on_message runs once the payload is in. pump() reads what is available; false once the link is gone or a
// header is invalid (error() says which).
class Inbound {
 public:
  using OnHeader = std::function<char*(const Header&)>;
  using OnMessage = std::function<void(const Header&)>;
  Inbound(OnHeader on_header, OnMessage on_message) : on_header_(std::move(on_header)), on_message_(std::move(on_message)) {}
  bool pump(Link& link);
  const std::string& error() const { return error_; }
  uint64_t bytes() const { return bytes_; }  // read so far: tells a polling thread that something came

 private:
  OnHeader on_header_;
  OnMessage on_message_;
  unsigned char raw_[kHeaderBytes];
  size_t header_got_ = 0, payload_got_ = 0;
  uint64_t bytes_ = 0;
  bool in_payload_ = false;
  Header h_{};
  char* dst_ = nullptr;
  std::string error_;
};

}  // namespace pslite
