// Write -> read -> equal, through text, plain files and gzip files; atomic writes.
#include "trace_compare.hpp"

#include <delta/trace.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>

using namespace delta::trace;
namespace fs = std::filesystem;

namespace {

// A trace using every field and edge value the format allows.
Trace sample_trace() {
  Trace trace;
  trace.source = "delta-recorder";
  trace.model = "gpt \"small\", batch 8 \xc3\xa9";
  trace.gpu = {"NVIDIA H200", "h200", 150'754'820'096ull};
  trace.allocator_settings = {{"expandable_segments", "true"}, {"max_split_size", ""}};
  trace.metadata = {{"overhead", "1.5%"}};
  trace.blocks.push_back({0, 4096, 0x7f0000000000ull, 0, kNever, kNever, Category::parameter, "layer0.weight"});
  trace.blocks.push_back({3, (1ull << 48), 0, 7, 0, 1000, Category::activation, ""});
  trace.blocks.push_back({9, 512, 0x7f0000000000ull + 4096, 1, 10, kNever, Category::optimizer_state, "m"});
  trace.blocks.push_back({UINT64_MAX, 1, 0, 0, 5, 5, Category::temporary, "tmp"});
  Op a;
  a.id = 2; a.name = "aten::mm"; a.kind = OpKind::kernel; a.start_ns = 0; a.duration_ns = 5;
  a.phase = Phase::forward; a.flops = 1e12; a.blocks = {{0, Access::read}, {3, Access::write}};
  Op b;
  b.id = 1; b.name = "memcpy"; b.kind = OpKind::copy_h2d; b.stream = 3; b.start_ns = 10; b.duration_ns = 0;
  b.duration_estimated = true; b.phase = Phase::backward; b.flops = 0.1; b.bytes = 512;
  b.blocks = {{9, Access::write}, {9, Access::read}, {UINT64_MAX, Access::touch}};
  Op c;
  c.id = 7; c.name = ""; c.kind = OpKind::op; c.start_ns = 10; c.duration_ns = (1ll << 62) - 5; c.iteration = 1;  // the durations' sum at the limit
  c.phase = Phase::optimizer; c.flops = 3.0e20;
  trace.ops = {a, b, c};
  trace.iterations = {{0, 0, 15, 0, 2}, {1, 15, 20, 2, 3}};
  return trace;
}

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("delta_trace_test_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("the sample trace is valid") { REQUIRE_NOTHROW(validate(sample_trace())); }

TEST_CASE("text round trip is lossless") {
  const Trace trace = sample_trace();
  const Trace back = parse_trace(to_json_text(trace));
  CHECK(delta::trace::testing::same(trace, back));
  CHECK(to_json_text(back) == to_json_text(trace));
}

TEST_CASE("file round trip, plain and gzip, is lossless and atomic") {
  const fs::path dir = temp_dir();
  const Trace trace = sample_trace();
  for (const char* name : {"t.json", "t.json.gz"}) {
    const std::string path = (dir / name).string();
    write_trace(trace, path);
    CHECK(delta::trace::testing::same(trace, read_trace(path)));
  }
  std::ifstream gz(dir / "t.json.gz", std::ios::binary);
  unsigned char magic[2] = {};
  gz.read(reinterpret_cast<char*>(magic), 2);
  CHECK((magic[0] == 0x1f && magic[1] == 0x8b));
  CHECK(fs::file_size(dir / "t.json.gz") < fs::file_size(dir / "t.json"));

  // A refused write leaves the old file untouched and no temporary behind.
  Trace broken = trace;
  broken.ops[0].blocks.push_back({12345, Access::read});
  const std::string path = (dir / "t.json").string();
  REQUIRE_THROWS_WITH(write_trace(broken, path), Catch::Contains("t.json: refusing to write an invalid trace: "
                                                                 "ops[0].blocks[2]: unknown block 12345"));
  CHECK(delta::trace::testing::same(trace, read_trace(path)));
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.is_regular_file() ? 1 : 0;
  CHECK(files == 2);
  // Into a folder that does not exist: an error naming the file.
  REQUIRE_THROWS_WITH(write_trace(trace, (dir / "missing" / "x.json").string()), Catch::Contains("cannot create"));
  fs::remove_all(dir);
}

TEST_CASE("a generated 100k-op trace round-trips through gzip") {
  Trace trace;
  trace.source = "capture";
  std::mt19937_64 random(7);
  for (std::uint64_t i = 0; i < 2000; ++i) {
    trace.blocks.push_back({i * 2 + 1, 1 + random() % (1u << 30), 0, random() % 4, static_cast<std::int64_t>(i),
                            kNever, static_cast<Category>(random() % 7), i % 3 ? "" : "b" + std::to_string(i)});
  }
  for (std::uint64_t i = 0; i < 100'000; ++i) {
    Op op;
    op.id = i;
    op.name = "kernel_" + std::to_string(i % 300);
    op.start_ns = static_cast<std::int64_t>(i * 10 + 2000);
    op.duration_ns = static_cast<std::int64_t>(random() % 10);
    op.flops = static_cast<double>(random() % 1000000) * 0.5;
    for (int u = 0; u < 4; ++u) op.blocks.push_back({(random() % 2000) * 2 + 1, static_cast<Access>(u % 3)});
    std::sort(op.blocks.begin(), op.blocks.end(), [](auto& x, auto& y) { return std::tie(x.block, x.access) < std::tie(y.block, y.access); });
    op.blocks.erase(std::unique(op.blocks.begin(), op.blocks.end(), [](auto& x, auto& y) { return x.block == y.block && x.access == y.access; }), op.blocks.end());
    trace.ops.push_back(std::move(op));
  }
  const fs::path dir = temp_dir();
  const std::string path = (dir / "big.json.gz").string();
  write_trace(trace, path);
  CHECK(delta::trace::testing::same(trace, read_trace(path)));
  fs::remove_all(dir);
}

TEST_CASE("enum names") {
  CHECK(std::string(to_string(Access::write)) == "write");
  CHECK(std::string(to_string(Phase::optimizer)) == "optimizer");
  CHECK(std::string(to_string(OpKind::copy_d2h)) == "copy_d2h");
  CHECK(std::string(to_string(Category::optimizer_state)) == "optimizer_state");
  CHECK(std::string(to_string(static_cast<Access>(9))) == "invalid");
}
