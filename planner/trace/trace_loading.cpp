#include "trace/trace_loading.hpp"

#include "trace/dtr_loader.hpp"

#include <fstream>

namespace delta::planner {

trace::Trace load_any_trace(const std::string& path) {
  if (!std::ifstream(path)) throw trace::TraceError(path + ": cannot open the trace file");
  if (looks_like_dtr_log(path)) return load_dtr_log(path);
#ifdef DELTA_PLANNER_HAVE_TRACE_IO
  return trace::read_trace(path);
#else
  throw trace::TraceError(path + ": not a DTR log, and this build has no trace reader for other formats");
#endif
}

}  // namespace delta::planner
