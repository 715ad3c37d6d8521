// Must not compile: two {} and one argument (tests/CMakeLists.txt builds it and expects the
// compiler's refusal).
#include "logging/log.hpp"

int main() {
  delta::log::warn("a {} b {}", 1);
  return 0;
}
