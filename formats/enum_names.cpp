// Names of the enums, as shown to people (the file stores their integer codes; see
// docs/trace-format.md for the code tables).
#include <delta/trace.hpp>

namespace delta::trace {

const char* to_string(Access access) {
  switch (access) {
    case Access::read: return "read";
    case Access::write: return "write";
    case Access::touch: return "touch";
  }
  return "invalid";
}

const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::unknown: return "unknown";
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::optimizer: return "optimizer";
  }
  return "invalid";
}

const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kernel: return "kernel";
    case OpKind::copy_h2d: return "copy_h2d";
    case OpKind::copy_d2h: return "copy_d2h";
    case OpKind::copy_d2d: return "copy_d2d";
    case OpKind::memset: return "memset";
    case OpKind::op: return "op";
  }
  return "invalid";
}

const char* to_string(Category category) {
  switch (category) {
    case Category::unknown: return "unknown";
    case Category::parameter: return "parameter";
    case Category::input: return "input";
    case Category::activation: return "activation";
    case Category::gradient: return "gradient";
    case Category::optimizer_state: return "optimizer_state";
    case Category::temporary: return "temporary";
  }
  return "invalid";
}

}  // namespace delta::trace
