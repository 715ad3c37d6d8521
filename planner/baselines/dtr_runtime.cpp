// The DTR baseline (Kirisame et al., "Dynamic Tensor Rematerialization", ICLR 2021), written
// from the paper's definitions: an online runtime that, when an allocation does not fit, evicts
// the resident unlocked storage with the smallest h = c / (m * s), where m is its size, s the
// time since its last access and c the compute to rebuild it plus that of the evicted storages
// around it, tracked as union-find equivalence classes (the paper's h_DTR^eq). Storages whose
// last handle is dropped are evicted at once (eager eviction) but stay rebuildable; evicted
// parents are rebuilt recursively before an op runs. An op's in-place update is a new version
// of the block, as in DTR's own model. With fragmentation counted, its allocations also go
// through the caching allocator capped at the budget, and an allocation the allocator cannot
// place makes it evict by the same heuristic until it fits.
#include "baselines/baselines.hpp"
#include "common/plan_edits.hpp"
#include "sim/allocator_ledger.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

namespace delta::planner {
namespace {

struct Node {
  std::uint64_t size = 0;
  std::int64_t compute = 0;
  std::int64_t producer = -1;  // op index; -1 for storages live before the step
  std::vector<std::uint32_t> children;
  bool material = false, pinned = false, external = true;
  int locks = 0;
  double last_access = -std::numeric_limits<double>::infinity();
  std::int64_t eq_class = -1;
  std::int64_t pool_slot = -1;
};

struct OutOfBudget : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class DtrRuntime {
 public:
  DtrRuntime(const TraceIndex& index, std::uint64_t budget, const GpuProfile& gpu, bool through_allocator)
      : index_(index), budget_(budget) {
    build_graph();
    if (through_allocator) {
      ledger_ = make_allocator_ledger(gpu.name, budget);
      if (!ledger_) throw std::runtime_error("this build has no caching allocator to simulate through");
    }
  }

  SimulationResult run() {
    SimulationResult result;
    result.native_step_time_ns = index_.native_step_ns();
    const std::size_t n = index_.op_count();
    try {
      for (std::uint32_t v = 0; v < nodes_.size(); ++v)
        if (nodes_[v].producer < 0) {  // parameters and inputs: resident and pinned
          nodes_[v].material = nodes_[v].pinned = true;
          memory_ += nodes_[v].size;
          place(v, nodes_[v].size);
        }
      peak_ = memory_;
      if (budget_ && memory_ > budget_) throw OutOfBudget("start of step: parameters and inputs exceed the budget");
      for (std::size_t i = 0; i < n; ++i) {
        current_op_ = i;
        execute(i, false);
        for (std::uint32_t v : dropped_after_[i]) release(v);
      }
      for (std::uint32_t v : outputs_) {  // the step's outputs must exist at its end
        if (!nodes_[v].material) materialize(v);
        nodes_[v].pinned = true;
      }
    } catch (const OutOfBudget& e) {
      result.feasible = false;
      result.error = std::string("dtr: ") + e.what();
      result.first_bad_op = static_cast<std::int64_t>(current_op_);
    }
    result.peak_bytes = peak_;
    result.step_time_ns = static_cast<std::int64_t>(clock_);
    result.extra_compute_ns = static_cast<std::int64_t>(clock_) - index_.native_step_ns();
    result.regenerations = rematerializations_;
    if (ledger_) result.allocator_reserved_peak = ledger_->reserved_peak();
    return result;
  }

 private:
  void build_graph() {
    const std::size_t n = index_.op_count();
    std::vector<std::int64_t> current(index_.blocks().size(), -1);
    for (std::uint32_t b = 0; b < index_.blocks().size(); ++b)
      if (index_.block(b).from_start) current[b] = new_node(b, -1);
    op_inputs_.resize(n);
    op_outputs_.resize(n);
    dropped_after_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      for (const OpUse& u : index_.uses(i))
        if (u.read && current[u.block] >= 0) op_inputs_[i].push_back(static_cast<std::uint32_t>(current[u.block]));
      for (const OpUse& u : index_.uses(i)) {
        if (!u.write) continue;
        if (current[u.block] >= 0) dropped_after_[i].push_back(static_cast<std::uint32_t>(current[u.block]));  // old version
        current[u.block] = new_node(u.block, static_cast<std::int64_t>(i));
        op_outputs_[i].push_back(static_cast<std::uint32_t>(current[u.block]));
      }
      for (std::uint32_t p : op_inputs_[i])
        for (std::uint32_t o : op_outputs_[i]) nodes_[p].children.push_back(o);
      for (std::uint32_t b : index_.freed_after(i))
        if (current[b] >= 0) dropped_after_[i].push_back(static_cast<std::uint32_t>(current[b]));
    }
    for (std::uint32_t b = 0; b < index_.blocks().size(); ++b)
      if (index_.block(b).to_end && current[b] >= 0) outputs_.push_back(static_cast<std::uint32_t>(current[b]));
  }

  std::int64_t new_node(std::uint32_t block, std::int64_t producer) {
    Node node;
    node.size = index_.block(block).size;
    node.producer = producer;
    node.compute = producer >= 0 ? index_.duration(static_cast<std::size_t>(producer)) : 0;
    nodes_.push_back(node);
    return static_cast<std::int64_t>(nodes_.size() - 1);
  }

  // --- the evictable pool ---
  void pool_add(std::uint32_t v) {
    if (nodes_[v].pool_slot >= 0 || nodes_[v].pinned) return;
    nodes_[v].pool_slot = static_cast<std::int64_t>(pool_.size());
    pool_.push_back(v);
  }
  void pool_remove(std::uint32_t v) {
    std::int64_t slot = nodes_[v].pool_slot;
    if (slot < 0) return;
    pool_[slot] = pool_.back();
    nodes_[pool_[slot]].pool_slot = slot;
    pool_.pop_back();
    nodes_[v].pool_slot = -1;
  }
  void lock(std::uint32_t v) {
    if (nodes_[v].locks++ == 0) pool_remove(v);
  }
  void unlock(std::uint32_t v) {
    if (--nodes_[v].locks == 0 && nodes_[v].material) pool_add(v);
  }

  // --- equivalence classes of evicted storages (union-find on compute) ---
  std::int64_t find(std::int64_t c) {
    while (class_parent_[c] != c) {
      class_parent_[c] = class_parent_[class_parent_[c]];
      c = class_parent_[c];
    }
    return c;
  }
  template <typename F>
  void for_each_evicted_neighbor(std::uint32_t v, F&& f) {
    const Node& node = nodes_[v];
    if (node.producer >= 0)
      for (std::uint32_t p : op_inputs_[node.producer])
        if (!nodes_[p].material && p != v) f(p);
    for (std::uint32_t c : node.children)
      if (!nodes_[c].material && c != v) f(c);
  }

  double cost(std::uint32_t v) {
    const Node& node = nodes_[v];
    double compute = double(node.compute);
    seen_roots_.clear();
    for_each_evicted_neighbor(v, [&](std::uint32_t u) {
      if (nodes_[u].eq_class < 0) return;
      std::int64_t root = find(nodes_[u].eq_class);
      if (std::find(seen_roots_.begin(), seen_roots_.end(), root) != seen_roots_.end()) return;
      seen_roots_.push_back(root);
      compute += class_value_[root];
    });
    const double staleness = clock_ - node.last_access;
    const double denominator = double(node.size) * staleness;
    return denominator > 0 ? compute / denominator : std::numeric_limits<double>::infinity();
  }

  void evict(std::uint32_t v) {
    Node& node = nodes_[v];
    node.material = false;
    memory_ -= node.size;
    if (ledger_) ledger_->release(v);
    pool_remove(v);
    const std::int64_t mine = static_cast<std::int64_t>(class_parent_.size());
    class_parent_.push_back(mine);
    class_value_.push_back(double(node.compute));
    node.eq_class = mine;
    for_each_evicted_neighbor(v, [&](std::uint32_t u) {
      if (nodes_[u].eq_class < 0) return;
      std::int64_t a = find(nodes_[u].eq_class), b = find(mine);
      if (a == b) return;
      class_parent_[a] = b;
      class_value_[b] += class_value_[a];
    });
  }

  // The evictable storage with the least h (the pool must not be empty).
  std::uint32_t victim() {
    double best = std::numeric_limits<double>::infinity();
    std::uint32_t chosen = pool_.front();
    for (std::uint32_t v : pool_) {
      const double h = cost(v);
      if (h <= best) {
        best = h;
        chosen = v;
      }
      if (h == 0) break;
    }
    return chosen;
  }

  void make_room(std::uint64_t bytes) {
    while (memory_ + bytes > budget_) {
      if (pool_.empty())
        throw OutOfBudget("op " + std::to_string(current_op_) + ": out of memory with nothing left to evict (" +
                          std::to_string(memory_) + " bytes resident, " + std::to_string(bytes) + " needed, budget " +
                          std::to_string(budget_) + ")");
      evict(victim());
    }
  }

  // Places a storage through the caching allocator, when counting fragmentation: evicts by
  // the heuristic until the allocator finds room, and fails only with nothing left to evict.
  void place(std::uint64_t key, std::uint64_t bytes) {
    if (!ledger_) return;
    allocate_making_room(*ledger_, key, bytes, [&](const std::string& refused) {
      if (pool_.empty())
        throw OutOfBudget("op " + std::to_string(current_op_) + ": the caching allocator cannot place " + std::to_string(bytes) +
                          " bytes (fragmentation) with nothing left to evict: " + refused);
      evict(victim());
    });
  }

  void materialize(std::uint32_t v) {
    const Node& node = nodes_[v];
    if (node.producer < 0) throw OutOfBudget("a parameter or input was evicted");
    execute(static_cast<std::size_t>(node.producer), true);
  }

  void execute(std::size_t op, bool rematerialize) {
    const std::vector<std::uint32_t>& inputs = op_inputs_[op];
    for (std::uint32_t p : inputs) nodes_[p].last_access = clock_;
    for (std::uint32_t p : inputs)
      if (nodes_[p].material) lock(p);
    for (std::uint32_t p : inputs) {
      if (nodes_[p].material) continue;
      materialize(p);
      lock(p);
    }
    std::uint64_t total = 0;
    for (std::uint32_t o : op_outputs_[op]) total += nodes_[o].size;
    if (budget_ && memory_ + total > budget_) make_room(total);
    // An output still resident is computed again into scratch memory; lock it while the
    // outputs are placed, so that making room for one cannot evict it.
    for (std::uint32_t o : op_outputs_[op])
      if (nodes_[o].material) lock(o);
    for (std::uint32_t o : op_outputs_[op]) place(nodes_[o].material ? scratch_key(o) : o, nodes_[o].size);
    clock_ += double(index_.duration(op));
    memory_ += total;
    peak_ = std::max(peak_, memory_);
    if (rematerialize) ++rematerializations_;
    for (std::uint32_t o : op_outputs_[op]) {
      Node& node = nodes_[o];
      if (node.material) {  // an output still resident is computed twice; the copy is dropped
        memory_ -= node.size;
        if (ledger_) ledger_->release(scratch_key(o));
        unlock(o);
        continue;
      }
      node.material = true;
      if (node.eq_class >= 0) {
        class_value_[find(node.eq_class)] -= double(node.compute);
        node.eq_class = -1;
      }
      if (node.locks == 0) pool_add(o);
    }
    for (std::uint32_t p : inputs) unlock(p);
    if (!rematerialize)
      for (std::uint32_t o : op_outputs_[op]) nodes_[o].last_access = clock_;
  }

  void release(std::uint32_t v) {
    Node& node = nodes_[v];
    node.external = false;
    if (node.material && !node.pinned && node.locks == 0) evict(v);
  }

  const TraceIndex& index_;
  std::uint64_t budget_;
  std::vector<Node> nodes_;
  std::vector<std::vector<std::uint32_t>> op_inputs_, op_outputs_, dropped_after_;
  std::vector<std::uint32_t> outputs_, pool_;
  std::vector<std::int64_t> class_parent_, seen_roots_;
  std::vector<double> class_value_;
  double clock_ = 0;
  std::uint64_t memory_ = 0, peak_ = 0, rematerializations_ = 0;
  std::size_t current_op_ = 0;
  std::unique_ptr<AllocatorLedger> ledger_;  // through the caching allocator only
};

}  // namespace

SimulationResult run_dtr(const PlanRequest& request) {
  return DtrRuntime(*request.index, request.budget_bytes, request.gpu, request.through_allocator).run();
}

}  // namespace delta::planner
