#include "trace/dtr_loader.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <memory>
#include <unordered_map>
#include <unordered_set>

namespace delta::planner {
namespace {

using nlohmann::json;

struct Storage {
  std::int64_t block = -1;  // index into Trace::blocks, -1 for zero-byte storages
  int handles = 0;
  bool constant = false;
};

// DTR writes integers as strings ("TIME":"733881"); plain JSON integers are taken too. The
// whole string must be the number: "12abc" or "1.5" is refused, never read as 12 or 1.
std::int64_t integer_value(const json& value, const std::string& what, const std::string& where) {
  try {
    if (value.is_string()) {
      const std::string text = value.get<std::string>();
      std::size_t used = 0;
      const std::int64_t number = std::stoll(text, &used);
      if (used == text.size() && !std::isspace(static_cast<unsigned char>(text.front()))) return number;
    }
    if (value.is_number_integer()) return value.get<std::int64_t>();
  } catch (const std::exception&) {  // not a number, or beyond 64 bits
  }
  throw trace::TraceError(where + ": " + what + " is not an integer: " + value.dump());
}

std::int64_t integer_field(const json& record, const char* name, const std::string& where) {
  auto it = record.find(name);
  if (it == record.end()) throw trace::TraceError(where + ": missing field " + name);
  return integer_value(*it, std::string("field ") + name, where);
}

std::string string_field(const json& record, const char* name, const std::string& where) {
  auto it = record.find(name);
  if (it == record.end() || !it->is_string()) throw trace::TraceError(where + ": missing string field " + name);
  return it->get<std::string>();
}

std::vector<std::string> name_list(const json& record, const char* name, const std::string& where) {
  auto it = record.find(name);
  if (it == record.end() || !it->is_array()) throw trace::TraceError(where + ": missing list field " + name);
  std::vector<std::string> out;
  for (const json& item : *it) {
    if (!item.is_string()) throw trace::TraceError(where + ": " + name + " holds a non-string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

class Loader {
 public:
  // `path` names the log in messages; the model name comes from its file name.
  explicit Loader(std::string path) : path_(std::move(path)) {
    trace_.source = "dtr-log";
    std::string file = path_.substr(path_.find_last_of('/') + 1);
    trace_.model = file.substr(0, file.find('-', file.find('-') + 1));
    trace_.gpu = {"Titan V", "titanv", 12ull << 30};
    trace_.metadata["dtr_log"] = file;
  }

  trace::Trace run(std::istream& in) {
    std::string line;
    std::size_t line_number = 0;
    bool started = false;
    while (std::getline(in, line)) {
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      where_ = path_ + ":" + std::to_string(line_number);
      json record;
      try {
        record = json::parse(line);
      } catch (const json::exception& e) {  // parse errors, and numbers beyond any type (out_of_range)
        throw trace::TraceError(where_ + ": not JSON (" + e.what() + ")");
      }
      if (!record.is_object() || !record.contains("INSTRUCTION"))
        throw trace::TraceError(where_ + ": no INSTRUCTION field");
      const std::string kind = string_field(record, "INSTRUCTION", where_);
      if (kind == "ANNOTATE") {
        const std::string annotation = string_field(record, "ANNOTATION", where_);
        if (annotation == "START") started = true;
        if (annotation == "BACKWARD") phase_ = trace::Phase::backward;
        continue;
      }
      if (!started) {  // like DTR's own parser: the step begins at START
        remember_names_before_start(record);
        continue;
      }
      apply(kind, record);
    }
    if (!pending_.empty())
      throw trace::TraceError(path_ + ": result " + pending_.begin()->first + " never got its ALIAS line");
    finish();
    return std::move(trace_);
  }

 private:
  void apply(const std::string& kind, const json& record) {
    if (kind == "CONSTANT") {
      pending_constants_.insert({string_field(record, "NAME", where_), true});
    } else if (kind == "MEMORY") {
      const std::string name = string_field(record, "NAME", where_);
      const std::int64_t bytes = integer_field(record, "MEMORY", where_);
      if (bytes < 0) throw trace::TraceError(where_ + ": negative MEMORY for " + name);
      if (static_cast<std::uint64_t>(bytes) > trace::kMaxBlockBytes)
        throw trace::TraceError(where_ + ": MEMORY " + std::to_string(bytes) + " for " + name + " is above the 256 TiB a trace may hold");
      memory_[name] = static_cast<std::uint64_t>(bytes);
      if (pending_constants_.erase(name)) bind(name, new_storage(memory_[name], true, kNoOp));
    } else if (kind == "CALL" || kind == "MUTATE") {
      add_op(kind, record);
    } else if (kind == "ALIAS") {
      const std::string name = string_field(record, "NAME", where_);
      auto it = pending_.find(name);
      if (it == pending_.end()) throw trace::TraceError(where_ + ": ALIAS of " + name + ", which no CALL produced");
      const std::size_t op_index = it->second;
      pending_.erase(it);
      const std::int64_t alias = integer_field(record, "ALIAS", where_);
      const std::vector<std::string>& args = op_args_[op_index];
      if (alias == -1) {
        auto memory = memory_.find(name);
        if (memory == memory_.end()) throw trace::TraceError(where_ + ": fresh result " + name + " has no MEMORY line");
        auto storage = new_storage(memory->second, false, op_index);
        if (storage->block >= 0) trace_.ops[op_index].blocks.push_back({trace_.blocks[storage->block].id, trace::Access::write});
        bind(name, storage);
      } else {
        if (alias < 0 || alias >= static_cast<std::int64_t>(args.size()))
          throw trace::TraceError(where_ + ": ALIAS " + std::to_string(alias) + " of " + name + " but its call has " + std::to_string(args.size()) + " arguments");
        bind(name, lookup(args[alias]));
      }
    } else if (kind == "COPY") {
      bind(string_field(record, "DST", where_), lookup(string_field(record, "SRC", where_)));
    } else if (kind == "COPY_FROM") {
      const std::string dst = string_field(record, "DST", where_);
      auto target = lookup(string_field(record, "SRC", where_));
      lookup(dst);
      unbind(dst);
      bind(dst, target);
    } else if (kind == "RELEASE") {
      const std::string name = string_field(record, "NAME", where_);
      // A release of a name no instruction made means a cut or corrupt log: the storage it
      // would free is unknown, so every later lifetime would be wrong.
      if (handles_.count(name)) {
        unbind(name);
      } else if (!made_before_start_.count(name)) {  // a handle of the set-up before START goes unnoticed
        throw trace::TraceError(where_ + ": RELEASE of " + name + ", which no instruction made");
      }
    } else {
      throw trace::TraceError(where_ + ": unknown instruction '" + kind + "'");
    }
  }

  void add_op(const std::string& kind, const json& record) {
    trace::Op op;
    op.id = trace_.ops.size();
    op.name = string_field(record, "NAME", where_);
    op.kind = trace::OpKind::op;
    op.start_ns = now_ns_;
    const std::int64_t time = integer_field(record, "TIME", where_);
    if (time < 0) throw trace::TraceError(where_ + ": negative TIME " + std::to_string(time));
    op.duration_ns = std::max<std::int64_t>(1, time);
    if (op.duration_ns > trace::kMaxTimeNs - now_ns_)  // the step's clock must stay inside a trace's times
      throw trace::TraceError(where_ + ": TIME " + std::to_string(op.duration_ns) + " takes the step past 2^62 ns");
    op.phase = phase_;
    now_ns_ += op.duration_ns;
    std::vector<std::string> args = name_list(record, "ARGS", where_);
    if (kind == "MUTATE" && args.empty()) throw trace::TraceError(where_ + ": MUTATE " + op.name + " has no ARGS to change");
    if (kind == "CALL" && args.empty() && name_list(record, "RESULT", where_).empty())
      throw trace::TraceError(where_ + ": CALL " + op.name + " has no ARGS and no RESULT: an op must touch a tensor");
    std::vector<std::int64_t> read_blocks;
    for (const std::string& arg : args) {
      auto storage = lookup(arg);
      if (storage->block >= 0) read_blocks.push_back(storage->block);
    }
    std::sort(read_blocks.begin(), read_blocks.end());
    read_blocks.erase(std::unique(read_blocks.begin(), read_blocks.end()), read_blocks.end());
    for (std::int64_t block : read_blocks) op.blocks.push_back({trace_.blocks[block].id, trace::Access::read});
    if (kind == "MUTATE") {
      auto it = record.find("MUTATE");
      if (it == record.end() || !it->is_array() || it->empty())
        throw trace::TraceError(where_ + ": MUTATE without its index list (an in-place op changes something)");
      for (const json& index : *it) {
        const std::int64_t k = integer_value(index, "MUTATE index", where_);
        if (k < 0 || k >= static_cast<std::int64_t>(args.size()))
          throw trace::TraceError(where_ + ": MUTATE index " + std::to_string(k) + " out of range");
        auto storage = lookup(args[k]);
        if (storage->block >= 0) op.blocks.push_back({trace_.blocks[storage->block].id, trace::Access::write});
      }
    } else {
      for (const std::string& result : name_list(record, "RESULT", where_)) pending_[result] = trace_.ops.size();
    }
    op_args_.push_back(std::move(args));
    trace_.ops.push_back(std::move(op));
  }

  // The names the lines before START made: the step may release them, and nothing else unknown.
  void remember_names_before_start(const json& record) {
    for (const char* field : {"NAME", "DST"})
      if (auto it = record.find(field); it != record.end() && it->is_string()) made_before_start_.insert(it->get<std::string>());
    if (auto it = record.find("RESULT"); it != record.end() && it->is_array())
      for (const json& name : *it)
        if (name.is_string()) made_before_start_.insert(name.get<std::string>());
  }

  static constexpr std::size_t kNoOp = static_cast<std::size_t>(-1);

  std::shared_ptr<Storage> new_storage(std::uint64_t bytes, bool constant, std::size_t op_index) {
    auto storage = std::make_shared<Storage>();
    storage->constant = constant;
    if (bytes > 0) {
      trace::Block block;
      block.id = trace_.blocks.size();
      block.size = bytes;
      block.alloc_ns = constant ? trace::kNever : trace_.ops[op_index].start_ns;
      block.category = constant ? trace::Category::parameter
                                : (phase_ == trace::Phase::backward ? trace::Category::gradient : trace::Category::activation);
      storage->block = static_cast<std::int64_t>(trace_.blocks.size());
      trace_.blocks.push_back(block);
    }
    return storage;
  }

  std::shared_ptr<Storage> lookup(const std::string& name) {
    auto it = handles_.find(name);
    if (it == handles_.end()) throw trace::TraceError(where_ + ": " + name + " is used but has no live handle");
    return it->second;
  }

  void bind(const std::string& name, std::shared_ptr<Storage> storage) {
    if (handles_.count(name)) throw trace::TraceError(where_ + ": handle " + name + " is defined twice");
    ++storage->handles;
    handles_[name] = std::move(storage);
  }

  void unbind(const std::string& name) {
    auto it = handles_.find(name);
    auto storage = it->second;
    handles_.erase(it);
    if (--storage->handles == 0 && !storage->constant && storage->block >= 0)
      trace_.blocks[storage->block].free_ns = now_ns_;
  }

  void finish() {
    if (trace_.ops.empty()) throw trace::TraceError(path_ + ": the log has no CALL or MUTATE after START: a DTR log records ops, and this one holds none");
    if (trace_.blocks.empty()) throw trace::TraceError(path_ + ": the log defines no storage of any size: a trace needs blocks");
    trace::Iteration iteration;
    iteration.start_ns = 0;
    iteration.end_ns = now_ns_;
    iteration.end_op = trace_.ops.size();
    trace_.iterations.push_back(iteration);
  }

  std::string path_;
  std::string where_;
  trace::Trace trace_;
  trace::Phase phase_ = trace::Phase::forward;
  std::int64_t now_ns_ = 0;
  std::unordered_map<std::string, std::shared_ptr<Storage>> handles_;
  std::unordered_map<std::string, std::uint64_t> memory_;
  std::unordered_map<std::string, bool> pending_constants_;
  std::unordered_set<std::string> made_before_start_;
  std::unordered_map<std::string, std::size_t> pending_;  // result name -> op index
  std::vector<std::vector<std::string>> op_args_;
};

}  // namespace

bool looks_like_dtr_log(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json record = json::parse(line, nullptr, false);
    return record.is_object() && record.contains("INSTRUCTION");
  }
  return false;
}

trace::Trace parse_dtr_log(std::istream& in, const std::string& name) { return Loader(name).run(in); }

trace::Trace load_dtr_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw trace::TraceError(path + ": cannot open the DTR log");
  return parse_dtr_log(in, path);
}

}  // namespace delta::planner
