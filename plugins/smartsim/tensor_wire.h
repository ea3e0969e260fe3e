// Tensor bytes on a hiredis connection without hiredis' copies: a command whose last argument is a large
// payload goes out with one sendmsg (gathering) straight from the caller's memory (hiredis would first copy every argument into
// one command string), and an AI.TENSORGET META BLOB reply is parsed off the socket with its blob read straight
// into the caller's buffer (hiredis would copy it into a reply object first). Everything else about the
// connection (connect, AUTH, timeouts, other commands) stays hiredis'. Both need a connection with nothing in
// flight, which the synchronous client guarantees.
#pragma once
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

struct redisContext;

namespace smartsim {

// The connection failed (closed, timed out, or answered something that is not RESP): it must not be reused.
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Sends argv (the last argument is the payload, sent from where it lies). Throws WireError.
void send_with_payload(redisContext* c, const std::vector<const char*>& argv, const std::vector<size_t>& lens);

struct TensorMeta {
  std::string dtype;
  std::vector<size_t> dims;
  size_t bytes = 0;
};

// Reads the reply to AI.TENSORGET key META BLOB. On a tensor, calls destination(meta) for where its bytes go
// (nullptr: read and drop them, so the connection stays usable) and returns "". On an error reply, returns
// its text. Throws WireError when the connection fails or the reply has another shape.
std::string read_tensor_reply(redisContext* c, TensorMeta& meta, const std::function<char*(const TensorMeta&)>& destination);

}  // namespace smartsim
