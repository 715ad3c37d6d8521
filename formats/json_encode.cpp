// to_json_text(): a Trace to format-version-1 JSON. Names and labels go through a string
// table (a model has a few hundred distinct op names and 100k+ ops); rows are arrays in the
// column order that the file itself states.
#include <delta/trace.hpp>

#include "format_rules.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <unordered_map>

namespace delta::trace {
namespace {

using nlohmann::json;

class StringTable {
 public:
  std::uint64_t index(const std::string& text) {
    auto [it, inserted] = indices_.try_emplace(text, strings_.size());
    if (inserted) strings_.push_back(text);
    return it->second;
  }
  json to_json() && { return json(std::move(strings_)); }

 private:
  std::unordered_map<std::string, std::uint64_t> indices_;
  std::vector<std::string> strings_;
};

template <std::size_t N>
json columns(const std::array<std::string_view, N>& names) {
  json out = json::array();
  for (std::string_view name : names) out.push_back(std::string(name));
  return out;
}

json code(auto value) { return static_cast<unsigned>(value); }

}  // namespace

std::string to_json_text(const Trace& trace) {
  StringTable strings;
  json blocks = json::array();
  blocks.get_ref<json::array_t&>().reserve(trace.blocks.size());
  for (const Block& block : trace.blocks) {
    blocks.push_back(json::array({block.id, block.size, block.address, block.stream, block.alloc_ns, block.free_ns,
                                  code(block.category), strings.index(block.label)}));
  }
  json ops = json::array();
  ops.get_ref<json::array_t&>().reserve(trace.ops.size());
  for (const Op& op : trace.ops) {
    json uses = json::array();
    uses.get_ref<json::array_t&>().reserve(op.blocks.size() * 2);
    for (const BlockUse& use : op.blocks) {
      uses.push_back(use.block);
      uses.push_back(code(use.access));
    }
    // Whole-number flops are written as integers: shorter, and read back to the same double.
    json flops = op.flops == static_cast<double>(static_cast<std::uint64_t>(op.flops)) && op.flops < 9.0e15
                     ? json(static_cast<std::uint64_t>(op.flops))
                     : json(op.flops);
    ops.push_back(json::array({op.id, strings.index(op.name), code(op.kind), op.stream, op.start_ns, op.duration_ns,
                               op.duration_estimated ? 1 : 0, op.iteration, code(op.phase), std::move(flops), op.bytes,
                               std::move(uses)}));
  }
  json iterations = json::array();
  for (const Iteration& iteration : trace.iterations) {
    iterations.push_back(
        json::array({iteration.index, iteration.start_ns, iteration.end_ns, iteration.first_op, iteration.end_op}));
  }
  // nlohmann's object keeps keys sorted; the order of keys in the file carries no meaning.
  json root;
  root["format"] = std::string(format::kFormatName);
  root["version"] = trace.version;
  root["source"] = trace.source;
  root["model"] = trace.model;
  root["gpu"] = {{"name", trace.gpu.name}, {"profile", trace.gpu.profile}, {"memory_bytes", trace.gpu.memory_bytes}};
  root["allocator_settings"] = trace.allocator_settings;
  root["metadata"] = trace.metadata;
  root["block_columns"] = columns(format::kBlockColumns);
  root["op_columns"] = columns(format::kOpColumns);
  root["iteration_columns"] = columns(format::kIterationColumns);
  root["blocks"] = std::move(blocks);
  root["ops"] = std::move(ops);
  root["iterations"] = std::move(iterations);
  root["strings"] = std::move(strings).to_json();
  // Invalid UTF-8 in a name is replaced rather than aborting the write of a whole trace.
  return root.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace delta::trace
