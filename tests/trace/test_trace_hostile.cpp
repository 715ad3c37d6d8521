// Malformed, truncated, overflowing and contradictory files: each must give a TraceError that
// names the file and the place, never a crash or a hang.
#include "gzip_codec.hpp"

#include <delta/trace.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using namespace delta::trace;

namespace {

const std::string kHead =
    R"({"format":"delta-trace","version":1,"source":"capture","strings":["conv","w"],)"
    R"("block_columns":["id","size","address","stream","alloc_ns","free_ns","category","label"],)"
    R"("op_columns":["id","name","kind","stream","start_ns","duration_ns","duration_estimated","iteration","phase","flops","bytes","blocks"],)"
    R"("iteration_columns":["index","start_ns","end_ns","first_op","end_op"],)";

// A valid document with two blocks and two ops, with parts replaceable by the cases below.
std::string document(const std::string& blocks, const std::string& ops, const std::string& iterations = "[]") {
  return kHead + R"("blocks":)" + blocks + R"(,"ops":)" + ops + R"(,"iterations":)" + iterations + "}";
}
const std::string kBlocks = R"([[1,4096,65536,0,-1,-1,1,1],[2,100,0,0,0,50,3,0]])";
const std::string kOps = R"([[0,0,0,0,0,10,0,0,1,1e9,0,[1,0,2,1]],[1,0,5,0,20,5,1,0,2,0,0,[2,0]]])";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  return text.replace(text.find(from), from.size(), to);
}

std::string error_of(const std::string& text) {
  try {
    parse_trace(text, "trace.json");
  } catch (const TraceError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("the base document is valid") { REQUIRE(error_of(document(kBlocks, kOps)) == "(accepted)"); }

TEST_CASE("hostile documents are refused with their place") {
  struct Case {
    const char* what;
    std::string text;
    const char* message;
  };
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const Case cases[] = {
      {"not JSON", "{\"format\":", "trace.json: byte 11: invalid JSON"},
      {"deep nesting", deep, "trace.json: byte 16: JSON nested deeper than 16 levels"},
      {"not an object", "[1,2]", "trace.json: document: must be a JSON object, not a array"},
      {"wrong format", R"({"format":"delta-alloc-stream","version":1})", "trace.json: format: \"delta-alloc-stream\" is not \"delta-trace\""},
      {"future version", R"({"format":"delta-trace","version":2})", "trace.json: version: 2 is not supported"},
      {"missing ops", kHead + R"("blocks":[],"iterations":[]})", "trace.json: ops: missing"},
      {"wrong columns", replaced(document(kBlocks, kOps), "\"label\"", "\"name\""),
       "trace.json: block_columns: must be exactly [id,size,address,stream,alloc_ns,free_ns,category,label]"},
      {"row too short", document(R"([[1,4096,0,0,-1,-1,1]])", "[]"), "trace.json: blocks[0]: has 7 columns, expected 8"},
      {"negative size", document(R"([[1,-5,0,0,-1,-1,1,1]])", "[]"), "trace.json: blocks[0].size: must be a non-negative integer, not a negative integer"},
      {"zero size", document(R"([[1,0,0,0,-1,-1,1,1]])", "[]"), "trace.json: blocks[0].size: size 0 is outside 1 B .. 256 TiB"},
      {"fractional id", document(R"([[1.5,8,0,0,-1,-1,1,1]])", "[]"), "trace.json: blocks[0].id: must be a non-negative integer, not a fractional or out-of-range number"},
      {"id above 2^64", document(R"([[18446744073709551616,8,0,0,-1,-1,1,1]])", "[]"), "trace.json: blocks[0].id: must be a non-negative integer, not a fractional or out-of-range number"},
      {"string for number", document(R"([[1,"8",0,0,-1,-1,1,1]])", "[]"), "trace.json: blocks[0].size: must be a non-negative integer, not a string"},
      {"free before alloc", document(R"([[1,8,0,0,100,50,1,1]])", "[]"), "trace.json: blocks[0].free_ns: block 1 freed at 50 ns, before its allocation at 100 ns"},
      {"time -2", document(R"([[1,8,0,0,-2,-1,1,1]])", "[]"), "trace.json: blocks[0].alloc_ns: -2 is negative (only -1, never, is allowed)"},
      {"duplicate block id", document(R"([[1,8,0,0,-1,-1,1,1],[1,8,0,0,-1,-1,1,1]])", "[]"), "trace.json: blocks[1]: id 1 does not follow id 1"},
      {"overlapping live blocks", document(R"([[1,4096,65536,0,-1,-1,1,1],[2,64,69000,0,10,-1,0,0]])", "[]"),
       "trace.json: blocks[1].address: block 2 at 69000 (+64 B) overlaps block 1 at 65536 (+4096 B) while both are live"},
      {"address overflow", document(R"([[1,4096,18446744073709551615,0,-1,-1,1,1]])", "[]"), "trace.json: blocks[0].address: address + size overflows 64 bits"},
      {"unknown category", document(R"([[1,8,0,0,-1,-1,7,1]])", "[]"), "trace.json: blocks[0].category: unknown category code 7 (0 .. 6)"},
      {"label out of table", document(R"([[1,8,0,0,-1,-1,1,99]])", "[]"), "trace.json: blocks[0].label: string index 99 is outside the table of 2 strings"},
      {"unknown block ref", document(kBlocks, R"([[0,0,0,0,0,10,0,0,1,1e9,0,[1,0,77,1]]])"), "trace.json: ops[0].blocks[1]: unknown block 77"},
      {"odd use list", document(kBlocks, R"([[0,0,0,0,0,10,0,0,1,1e9,0,[1,0,2]]])"), "trace.json: ops[0].blocks: holds 3 numbers; block uses are [block, access] pairs"},
      {"bad access", document(kBlocks, R"([[0,0,0,0,0,10,0,0,1,1e9,0,[1,3]]])"), "trace.json: ops[0].blocks[0].access: unknown access code 3 (0 .. 2)"},
      {"duplicate use", document(kBlocks, R"([[0,0,0,0,0,10,0,0,1,1e9,0,[1,0,1,0]]])"), "trace.json: ops[0].blocks: block 1 is listed twice as read"},
      {"use before alloc", replaced(document(kBlocks, R"([[0,0,0,0,0,10,0,0,1,1e9,0,[2,0]]])"), "[2,100,0,0,0,50", "[2,100,0,0,5,50"),
       "trace.json: ops[0].blocks[0]: op starts at 0 ns, before block 2 is allocated at 5 ns"},
      {"ops unsorted", document(kBlocks, R"([[0,0,0,0,30,10,0,0,1,1e9,0,[]],[1,0,5,0,20,5,1,0,2,0,0,[]]])"),
       "trace.json: ops[1].start_ns: op 1 starts at 20 ns, before the previous op 0 at 30 ns"},
      {"duplicate op id", document(kBlocks, R"([[4,0,0,0,0,10,0,0,1,1e9,0,[]],[4,0,5,0,20,5,1,0,2,0,0,[]]])"), "trace.json: ops[1].id: op id 4 is used twice"},
      {"negative flops", document(kBlocks, R"([[0,0,0,0,0,10,0,0,1,-1,0,[]]])"), "trace.json: ops[0].flops: must be finite and not negative"},
      {"flops beyond double", document(kBlocks, R"([[0,0,0,0,0,10,0,0,1,1e999,0,[]]])"), "trace.json: invalid JSON: number overflow parsing '1e999'"},
      {"huge duration", document(kBlocks, R"([[0,0,0,0,0,9223372036854775807,0,0,1,0,0,[]]])"), "trace.json: ops[0].duration_ns: 9223372036854775807 is above the limit 4611686018427387904"},
      {"bad estimated flag", document(kBlocks, R"([[0,0,0,0,0,1,2,0,1,0,0,[]]])"), "trace.json: ops[0].duration_estimated: unknown flag code 2 (0 .. 1)"},
      {"iteration beyond ops", document(kBlocks, kOps, "[[0,0,30,0,3]]"), "trace.json: iterations[0]: ops 0 .. 3 are not a range inside the 2 ops"},
      {"iteration mismatch", document(kBlocks, kOps, "[[0,0,30,0,1],[1,30,40,1,2]]"), "trace.json: ops[1].iteration: op says iteration 0 but lies in iteration 1"},
      {"durations summing past 2^62", document(kBlocks, R"([[0,0,0,0,0,4611686018427387904,0,0,1,0,0,[]],[1,0,5,0,20,1,1,0,2,0,0,[]]])"),
       "trace.json: ops[1].duration_ns: the ops' durations up to here sum past 2^62 ns"},
      {"sizes summing past 2^62", document("[" + [] {
         std::string rows;  // 2^14 + 1 blocks of 2^48 bytes: each in range, together past 2^62
         for (int i = 1; i <= (1 << 14) + 1; ++i) rows += (i > 1 ? "," : "") + std::string("[") + std::to_string(i) + ",281474976710656,0,0,-1,-1,1,0]";
         return rows;
       }() + "]", "[]"),
       "trace.json: blocks[16384].size: the blocks' sizes up to here sum past 2^62 bytes"},
      {"NUL byte", document(kBlocks, kOps) + std::string(1, '\0') + "garbage", "trace.json: byte "},
      {"metadata not strings", replaced(document(kBlocks, kOps), "\"source\":\"capture\"", "\"source\":\"capture\",\"metadata\":{\"a\":1}"),
       "trace.json: metadata.a: must be a string, not a non-negative integer"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CHECK_THAT(error_of(c.text), Catch::StartsWith(c.message));
  }
}

TEST_CASE("damaged gzip files are refused with the file name") {
  const std::string text = document(kBlocks, kOps);
  const std::string packed = gzip(text);
  REQUIRE_NOTHROW(parse_trace_bytes(packed, "t.json.gz"));
  CHECK_THROWS_WITH(parse_trace_bytes(packed.substr(0, packed.size() / 2), "t.json.gz"),
                    "t.json.gz: truncated gzip data: the compressed stream ends early");
  std::string corrupt = packed;
  corrupt[12] = static_cast<char>(corrupt[12] ^ 0x5a);
  corrupt[13] = static_cast<char>(corrupt[13] ^ 0xff);
  CHECK_THROWS_WITH(parse_trace_bytes(corrupt, "t.json.gz"), Catch::StartsWith("t.json.gz: "));
  CHECK_THROWS_WITH(parse_trace_bytes(packed + "junk", "t.json.gz"),
                    "t.json.gz: corrupt gzip data: 4 stray bytes after the compressed stream");
  // Two members, as `cat a.gz b.gz` makes, are one stream: here they make invalid JSON.
  CHECK_THROWS_WITH(parse_trace_bytes(packed + packed, "t.json.gz"), Catch::Contains("invalid JSON"));
  CHECK_THROWS_WITH(parse_trace_bytes(std::string("\x1f\x8b", 2), "t.json.gz"), Catch::StartsWith("t.json.gz: truncated gzip data"));
  // A bomb: a tiny file that inflates past the limit is stopped, not held in memory.
  CHECK_THROWS_WITH(gunzip(gzip(std::string(1 << 20, ' ')), 1000), Catch::Contains("decompresses to more than"));
}

TEST_CASE("files that cannot be read name the file") {
  CHECK_THROWS_WITH(read_trace("/nonexistent/trace.json"), "/nonexistent/trace.json: cannot open (No such file or directory)");
  CHECK_THROWS_WITH(read_trace("/"), Catch::StartsWith("/: "));
}
