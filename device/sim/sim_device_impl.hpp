// The sim device's construction entry point, shared by the factory and the tests that need a
// specific ordinal. The class itself stays private to sim_device.cpp.
#pragma once

#include <delta/sim_device.hpp>

#include <cstddef>
#include <memory>
#include <string_view>

namespace delta::sim {

// Throws std::invalid_argument for an unknown profile name.
std::shared_ptr<SimDevice> create_sim_device(const SimOptions& options, int ordinal);

// Parses a DELTA_SIM_CAPACITY value: bytes with an optional unit (K, M, G, T and KiB..TiB are
// powers of 1024; KB, MB, GB, TB powers of 1000), e.g. "16GiB". Throws std::invalid_argument
// naming DELTA_SIM_CAPACITY and the bad value.
std::size_t parse_capacity(std::string_view text);

}  // namespace delta::sim
