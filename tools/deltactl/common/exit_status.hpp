// An outcome that is not a usage or input error but still a failure the caller can test for:
// main prints the message and exits with the code.
#pragma once

#include <stdexcept>
#include <string>

namespace deltactl {

class ExitStatus : public std::runtime_error {
 public:
  ExitStatus(int code, const std::string& message) : std::runtime_error(message), code(code) {}
  int code;
};

}  // namespace deltactl
