#include "profiler/iteration_detect.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using delta::profiler::detect_iterations;
using delta::profiler::DetectionOptions;

namespace {

// One id per character: "abc" -> {a, b, c}.
std::vector<std::uint32_t> seq(const std::string& text) { return {text.begin(), text.end()}; }
std::string repeat(const std::string& text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += text;
  return out;
}

}  // namespace

TEST_CASE("a purely periodic sequence splits at its period") {
  const auto names = seq(repeat("ABCD", 5));
  auto found = detect_iterations(names, {});
  REQUIRE(found);
  CHECK(found->period == 4);
  CHECK(found->first_boundary == 0);
  CHECK(found->complete == 5);
}

TEST_CASE("warm-up launches before the cycle are left out of the iterations") {
  const auto names = seq("xyzw" + repeat("ABCDE", 4));
  auto found = detect_iterations(names, {});
  REQUIRE(found);
  CHECK(found->period == 5);
  CHECK(found->first_boundary == 4);
  CHECK(found->complete == 4);
}

TEST_CASE("a warm-up that ends like an iteration is cut where the fewest bytes are live") {
  // The warm-up step ends with the same two launches (D E) as every step, so the names alone
  // would start the cycle two launches early. Live bytes are lowest before A (the step start).
  const std::string text = "wqDE" + repeat("ABCDE", 4);
  const auto names = seq(text);
  std::vector<std::uint64_t> live;
  for (char c : text) live.push_back(c == 'A' ? 100 : c == 'w' ? 10 : 500);
  auto by_names = detect_iterations(names, {});
  REQUIRE(by_names);
  CHECK(by_names->first_boundary == 2);
  auto by_memory = detect_iterations(names, live);
  REQUIRE(by_memory);
  CHECK(by_memory->period == 5);
  CHECK(by_memory->first_boundary == 4);
  CHECK(by_memory->complete == 4);
}

TEST_CASE("layers repeating inside an iteration do not pass for iterations") {
  // in, 4 identical layers forward, loss, 4 layers backward, optimizer: the layer pattern
  // repeats too, but the whole step covers more of the sequence.
  const std::string step = "I" + repeat("LM", 4) + "S" + repeat("bc", 4) + "O";
  const auto names = seq("zz" + repeat(step, 3));
  auto found = detect_iterations(names, {});
  REQUIRE(found);
  CHECK(found->period == step.size());
  CHECK(found->first_boundary == 2);
  CHECK(found->complete == 3);
}

TEST_CASE("an unfinished last iteration is not counted") {
  const auto names = seq(repeat("ABCD", 3) + "AB");
  auto found = detect_iterations(names, {});
  REQUIRE(found);
  CHECK(found->period == 4);
  CHECK(found->first_boundary == 0);
  CHECK(found->complete == 3);
}

TEST_CASE("no iterations are claimed without enough evidence") {
  CHECK_FALSE(detect_iterations(seq("ABCDEFGHIJ"), {}));  // no repetition
  CHECK_FALSE(detect_iterations(seq(""), {}));
  DetectionOptions three;
  three.min_repeats = 3;
  CHECK_FALSE(detect_iterations(seq("xy" + repeat("ABC", 2)), {}, three));
  CHECK(detect_iterations(seq("xy" + repeat("ABC", 3)), {}, three));
  // A short periodic tail after a long irregular run covers too little of it.
  CHECK_FALSE(detect_iterations(seq("abcdefghijklmnopqrstuvwxyz" + repeat("AB", 3)), {}));
  CHECK_THROWS_AS(detect_iterations(seq("ABAB"), std::vector<std::uint64_t>{1, 2}), std::invalid_argument);
}

TEST_CASE("a loop whose live bytes grow every period is no training step") {
  // Moving a model to the GPU layer by layer: the same copies and fills per layer, but every
  // layer leaves its parameters behind. A training step returns to the bytes it started with.
  const auto names = seq(repeat("UVW", 8));
  std::vector<std::uint64_t> growing, steady;
  for (std::size_t i = 0; i < names.size(); ++i) {
    growing.push_back((100 + 10 * (i / 3)) << 20);       // +10 MiB a layer on 100 MiB
    steady.push_back((100 + (i % 3 == 1 ? 40 : 0)) << 20);  // activations come and go
  }
  std::string refused;
  CHECK_FALSE(detect_iterations(names, growing, {}, &refused));
  CHECK(refused.find("repeat every 3 kernels") != std::string::npos);
  CHECK(refused.find("grows") != std::string::npos);
  refused.clear();
  auto found = detect_iterations(names, steady, {}, &refused);
  REQUIRE(found);
  CHECK(found->period == 3);
  CHECK(refused.empty());
  // Drift inside the tolerance (a logged loss kept each step) still counts as steady.
  std::vector<std::uint64_t> drifting = steady;
  for (std::size_t i = 0; i < drifting.size(); ++i) drifting[i] += (i / 3) * 512;
  CHECK(detect_iterations(names, drifting));
  // Two whole periods and a part of a third: the cut where the third starts is compared too.
  const auto short_names = seq(std::string(repeat("UVW", 2)) + "U");
  std::vector<std::uint64_t> short_growing;
  for (std::size_t i = 0; i < short_names.size(); ++i) short_growing.push_back((100 + 10 * (i / 3)) << 20);
  CHECK_FALSE(detect_iterations(short_names, short_growing));
  std::vector<std::uint64_t> short_steady(short_names.size(), 100 << 20);
  CHECK(detect_iterations(short_names, short_steady));
  // On 1 GiB the tolerance is 1% (10 MiB), above the 1 MiB slack: 7 MiB of drift is steady,
  // 21 MiB is not.
  std::vector<std::uint64_t> big_drift(names.size()), bigger_drift(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    big_drift[i] = (std::uint64_t(1) << 30) + (i / 3) * (1 << 20);
    bigger_drift[i] = (std::uint64_t(1) << 30) + (i / 3) * (3 << 20);
  }
  CHECK(detect_iterations(names, big_drift));
  CHECK_FALSE(detect_iterations(names, bigger_drift));
  // The first step leaves the optimizer's state behind (Adam's moments): still a training loop.
  std::vector<std::uint64_t> first_step_keeps = steady;
  for (std::size_t i = 2; i < first_step_keeps.size(); ++i) first_step_keeps[i] += 50 << 20;
  found = detect_iterations(names, first_step_keeps);
  REQUIRE(found);
  CHECK(found->period == 3);
}
