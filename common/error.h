// A user-facing error: its message is printed as one line and the command exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace fanout {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace fanout
