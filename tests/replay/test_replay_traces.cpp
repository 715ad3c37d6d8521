// Every real trace, imported by tools/importers (the replay_import_traces test writes the
// streams), replayed through DELTA on the sim device and through the native model.
#include "replay/delta_target.hpp"
#include "replay/native_model.hpp"
#include "replay/replayer.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

using namespace delta::replay;

namespace {

AllocStream load(const std::string& name) {
  std::filesystem::path path = std::filesystem::path(DELTA_REPLAY_STREAMS_DIR) / (name + ".json.gz");
  INFO("stream " << path << " is written by the replay_import_traces test; run ctest, not this binary alone");
  REQUIRE(std::filesystem::exists(path));
  return read_alloc_stream(path);
}

void check_sane(const AllocStream& stream, const ReplayResult& r) {
  INFO(r.policy << " on " << stream.origin);
  CHECK(r.ooms == 0);
  CHECK(r.skipped_frees == 0);
  CHECK(r.events == stream.events.size() + stream.initial_live.size());
  // Nothing can hold less than the live bytes, or reserve less than it hands out.
  CHECK(r.peak_allocated >= stream.peak_live_bytes);
  CHECK(r.peak_reserved >= r.peak_allocated);
  CHECK(r.reserved_over_live >= 1.0);
  CHECK(r.reserved_over_live < 2.0);
  CHECK(r.mean_fragmentation >= 0.0);
  CHECK(r.mean_fragmentation < 1.0);
  CHECK(r.cache_hit_rate > 0.0);
  CHECK(r.cache_hit_rate <= 1.0);
}

ReplayResult replay_delta(const AllocStream& stream, std::size_t check_every) {
  DeltaTargetOptions options;
  options.gpu = "h200";
  DeltaTarget target(options);
  ReplayResult r = replay(stream, target, ReplayOptions{check_every, {}});
  CHECK(r.invariant_checks == r.events / check_every);
  // Everything the stream still holds at the end is live in the allocator too.
  CHECK(target.stats().allocated_bytes >= 1);
  return r;
}

}  // namespace

TEST_CASE("DTR logs replay through DELTA with invariants checked after every event", "[replay][traces]") {
  for (const char* name : {"resnet32", "tv_densenet121", "transformer", "unet", "lstm"}) {
    AllocStream stream = load(name);
    check_sane(stream, replay_delta(stream, 1));
    NativeCachingModel native(NativeModelConfig{141ull << 30});
    check_sane(stream, replay(stream, native, ReplayOptions{1, {}}));
  }
}

TEST_CASE("the PyTorch snapshot replays through DELTA and the native model", "[replay][traces]") {
  AllocStream stream = load("transformerlm2.7b");
  REQUIRE(stream.native_observed.has_value());
  // Checking after every one of its ~13,000 events takes about 3 s: cheap enough to do.
  ReplayResult delta = replay_delta(stream, 1);
  check_sane(stream, delta);

  NativeCachingModel native(NativeModelConfig{141ull << 30});
  ReplayResult model = replay(stream, native, ReplayOptions{1, {}});
  check_sane(stream, model);
  // The model replays the native policy on a trace the native allocator produced: its peak
  // must land close to what that allocator recorded (it starts from an empty cache, the
  // recorded run did not, so allow a margin).
  const double recorded = double(stream.native_observed->peak_reserved);
  CHECK(double(model.peak_reserved) / recorded == Approx(1.0).margin(0.05));
}
