// The DTR op-log loader on small logs written here: what each instruction makes of the trace,
// and a clear error, naming the line, for each way a log can be wrong.
#include "trace/dtr_loader.hpp"

#include <catch2/catch.hpp>

#include <sstream>
#include <string>

namespace {

using delta::planner::parse_dtr_log;

// A parameter w (through a copied handle), an input x, conv making y and a view v of x, relu
// making z, z updated in place, a zero-byte result, a backward call, and releases.
const std::string kLog = R"({"INSTRUCTION":"CONSTANT","NAME":"before"}
{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"w"}
{"INSTRUCTION":"MEMORY","MEMORY":"4096","NAME":"w"}
{"DST":"w2","INSTRUCTION":"COPY","SRC":"w"}
{"INSTRUCTION":"CONSTANT","NAME":"x"}
{"INSTRUCTION":"MEMORY","MEMORY":"65536","NAME":"x"}
{"ARGS":["x","w2"],"INSTRUCTION":"CALL","NAME":"conv","RESULT":["y","v"],"TIME":"1000"}
{"INSTRUCTION":"MEMORY","MEMORY":"131072","NAME":"y"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}
{"ALIAS":"0","INSTRUCTION":"ALIAS","NAME":"v"}
{"ARGS":["y"],"INSTRUCTION":"CALL","NAME":"relu","RESULT":["z"],"TIME":"300"}
{"INSTRUCTION":"MEMORY","MEMORY":"131072","NAME":"z"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"z"}
{"ARGS":["z","y"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"add_","TIME":"200"}
{"ARGS":["z"],"INSTRUCTION":"CALL","NAME":"empty","RESULT":["e"],"TIME":"5"}
{"INSTRUCTION":"MEMORY","MEMORY":"0","NAME":"e"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"e"}
{"ANNOTATION":"BACKWARD","INSTRUCTION":"ANNOTATE"}
{"ARGS":["z","w2"],"INSTRUCTION":"CALL","NAME":"conv_backward","RESULT":["g"],"TIME":"2000"}
{"INSTRUCTION":"MEMORY","MEMORY":"4096","NAME":"g"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"g"}
{"INSTRUCTION":"RELEASE","NAME":"y"}
{"INSTRUCTION":"RELEASE","NAME":"before"}
)";

delta::trace::Trace load(const std::string& text) {
  std::istringstream in(text);
  return parse_dtr_log(in, "logs/resnet32-56-test.log");
}

// kLog with its first `from` replaced by `to`.
std::string edited(const std::string& from, const std::string& to) {
  std::string text = kLog;
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("DTR loader: what each instruction makes") {
  const delta::trace::Trace t = load(kLog);
  CHECK(t.model == "resnet32-56");
  REQUIRE(t.ops.size() == 5);  // conv, relu, add_, empty, conv_backward
  CHECK(t.ops[0].name == "conv");
  CHECK(t.ops[4].phase == delta::trace::Phase::backward);
  // Blocks: w, x, y, z, g (the zero-byte result is none); w and x are parameters.
  REQUIRE(t.blocks.size() == 5);
  CHECK(t.blocks[0].category == delta::trace::Category::parameter);
  CHECK(t.blocks[2].size == 131072);
  // TIME is the op's duration; the clock starts at 0.
  CHECK(t.ops[1].start_ns == 1000);
  CHECK(t.ops[1].duration_ns == 300);
  // The in-place update reads and writes z.
  bool reads = false, writes = false;
  for (const auto& use : t.ops[2].blocks) {
    reads |= use.block == t.blocks[3].id && use.access == delta::trace::Access::read;
    writes |= use.block == t.blocks[3].id && use.access == delta::trace::Access::write;
  }
  CHECK((reads && writes));
  // y is freed at its release (the view v of x does not hold it); z is never released.
  CHECK(t.blocks[2].free_ns == t.iterations.back().end_ns);
  CHECK(t.blocks[3].free_ns == delta::trace::kNever);
  REQUIRE_NOTHROW(delta::trace::validate(t));
}

TEST_CASE("DTR loader: each malformed log is refused with its line") {
  struct Case {
    std::string from, to, message;
  };
  const Case cases[] = {
      {R"("MUTATE":[0])", R"("MUTATE":["abc"])", "test.log:15: MUTATE index is not an integer"},
      {R"("MUTATE":[0])", R"("MUTATE":[true])", "test.log:15: MUTATE index is not an integer"},
      {R"("MUTATE":[0])", R"("MUTATE":[7])", "test.log:15: MUTATE index 7 out of range"},
      {R"("MUTATE":[0])", R"("MUTATE":0)", "test.log:15: MUTATE without its index list"},
      {R"("TIME":"1000")", R"("TIME":"9223372036854775807")", "test.log:8: TIME 9223372036854775807 takes the step past"},
      {R"("TIME":"1000")", R"("TIME":"99999999999999999999")", "test.log:8: field TIME is not an integer"},
      {R"("TIME":"1000")", R"("TIME":1e999)", "test.log:8: not JSON"},
      {R"("MEMORY":"131072","NAME":"y")", R"("MEMORY":"281474976710657","NAME":"y")", "test.log:9: MEMORY 281474976710657 for y is above"},
      {R"("MEMORY":"131072","NAME":"y")", R"("MEMORY":"-4","NAME":"y")", "test.log:9: negative MEMORY for y"},
      {R"("INSTRUCTION":"RELEASE","NAME":"y")", R"("INSTRUCTION":"FREE","NAME":"y")", "test.log:23: unknown instruction 'FREE'"},
      {R"({"ALIAS":"0","INSTRUCTION":"ALIAS","NAME":"v"})", R"({"ALIAS":"5","INSTRUCTION":"ALIAS","NAME":"v"})", "test.log:11: ALIAS 5 of v but its call has 2 arguments"},
      {R"("ARGS":["y"])", R"("ARGS":["nobody"])", "test.log:12: nobody is used but has no live handle"},
      {R"({"DST":"w2","INSTRUCTION":"COPY","SRC":"w"})", R"({"DST":"x","INSTRUCTION":"COPY","SRC":"w"})", "handle x is defined twice"},
      {R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"g"})", "", "result g never got its ALIAS line"},
      // Nothing silent: a release of a name no line made, sizes and times that are not whole
      // numbers, ops that touch nothing.
      {R"("RELEASE","NAME":"y")", R"("RELEASE","NAME":"ghost")", "test.log:23: RELEASE of ghost, which no instruction made"},
      {R"("MEMORY":"131072","NAME":"y")", R"("MEMORY":"12abc","NAME":"y")", "test.log:9: field MEMORY is not an integer"},
      {R"("MEMORY":"131072","NAME":"y")", R"("MEMORY":"1.5","NAME":"y")", "test.log:9: field MEMORY is not an integer"},
      {R"("MEMORY":"131072","NAME":"y")", R"("MEMORY":" 7","NAME":"y")", "test.log:9: field MEMORY is not an integer"},
      {R"("TIME":"1000")", R"("TIME":"-1000")", "test.log:8: negative TIME -1000"},
      {R"("ARGS":["y"],"INSTRUCTION":"CALL","NAME":"relu","RESULT":["z"])", R"("ARGS":[],"INSTRUCTION":"CALL","NAME":"relu","RESULT":[])",
       "test.log:12: CALL relu has no ARGS and no RESULT"},
      {R"("MUTATE":[0])", R"("MUTATE":[])", "test.log:15: MUTATE without its index list"},
      {R"({"INSTRUCTION":"MEMORY","MEMORY":"131072","NAME":"z"})", "{\"INSTRUCTION\":", "test.log:13: not JSON"},
  };
  for (const Case& c : cases) {
    INFO(c.to);
    CHECK_THROWS_WITH(load(edited(c.from, c.to)), Catch::Contains(c.message));
  }
}
