#include "program_runner.hpp"

#include "executor/executor.hpp"
#include "executor/routes/sim_route.hpp"

#include <delta/allocator.hpp>
#include <delta/sim_device.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>

namespace delta::execute {
namespace {

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// One run of the program: the device, the allocator and, under a plan, the executor, with the
// program's view of its blocks.
class Program {
 public:
  Program(const trace::Trace& trace, const executor::StepProgram& program, const plan::Plan* plan, const ProgramOptions& options)
      : trace_(trace), program_(&program), options_(options) {
    SimOptions sim_options;
    sim_options.profile = options.gpu;
    sim_options.content = SimContent::digest;
    sim_options.on_unmapped = SimUnmapped::count;
    device_ = make_sim_device(sim_options);
    sim_ = as_sim(device_.get());
    if (options.prepare_device) options.prepare_device(*sim_);
    allocator_ = std::make_unique<CachingAllocator>(device_, AllocatorConfig{});
    if (plan) {
      executor::ExecutorOptions executor_options;
      executor_options.copy_discards = options.copy_discards;
      auto planned = std::make_unique<executor::Executor>(*allocator_, *program_,
                                                         executor::schedule_actions(*plan, trace_, *program_), executor_options);
      executor_ = planned.get();
      entry_ = std::move(planned);
    }
    for (const executor::StepOp& op : program_->ops)
      if (!streams_.count(op.stream)) streams_[op.stream] = device_->create_stream();
    ptrs_.assign(program_->blocks.size(), 0);
    auto observer = [this](const SimDevice::Activity& activity) {
      if (activity.kind == SimDevice::Activity::Kind::kernel && reading_) reading_->digests = activity.read_digests;
      if (timeline_) observe(activity);
    };
    sim_->set_activity_observer(observer);
    if (!plan && options.entry) entry_ = options.entry(*allocator_, *sim_, observer);
    if (entry_) route_ = std::make_unique<executor::SimLaunchRoute>(*sim_, *entry_);
    if (options_.hooks) options_.hooks->on_device(*sim_);
  }

  ~Program() {
    sim_->set_activity_observer({});
    route_.reset();
    entry_.reset();
  }

  ProgramRun run() {
    ProgramRun out;
    std::mt19937_64 rng(options_.perturb.value_or(0));
    try {
      for (std::size_t it = 0; it < options_.iterations; ++it) {
        if (!options_.shapes.empty()) program_ = options_.shapes[options_.shape_of_iteration.at(it)];
        slow_ = 1.0;
        if (options_.slow_from != 0 && it + 1 >= options_.slow_from)
          slow_ = options_.slow_growing ? std::pow(options_.slow_factor, double(it + 2 - options_.slow_from)) : options_.slow_factor;
        device_->synchronize();
        const std::uint64_t start = sim_->now_ns();
        if (options_.record_timeline && it + 1 == options_.iterations) {
          timeline_ = &out.timeline;
          timeline_start_ = start;
        }
        for (std::uint32_t b : program_->carried) free_block(b);
        for (std::uint32_t b : program_->persistent) allocate_block(b);
        for (std::uint32_t k = 0; k < program_->ops.size(); ++k) {
          const executor::StepOp& op = program_->ops[k];
          for (std::uint32_t b : op.allocate_before) allocate_block(b);
          const std::uint64_t roll = options_.perturb ? rng() % 400 : 399;  // 4 kinds, each once per 400 ops
          const int times = roll == 0 ? 0 : roll == 1 ? 2 : 1;  // skipped, repeated, or as traced
          if (roll < 4) out.perturbations++;
          for (int t = 0; t < times; ++t) launch_op(out, static_cast<std::uint32_t>(it), k);
          if (roll == 2) extra_op(out, static_cast<std::uint32_t>(it), k);
          if (roll == 3) {  // an allocation of another size, used and freed
            void* ptr = allocate(12345, stream_of(op.stream));
            deallocate(ptr);
          }
          for (std::uint32_t b : op.free_after) free_block(b);
          if (options_.check_invariants) {
            allocator_->check_invariants();
            if (entry_) entry_->check_invariants();
          }
        }
        if (entry_) entry_->end_step();
        if (options_.hooks) options_.hooks->on_step();
        device_->synchronize();
        out.step_times_ns.push_back(sim_->now_ns() - start);
        timeline_ = nullptr;
      }
      if (entry_) entry_->finish();
      device_->synchronize();
      for (std::uint32_t b = 0; b < program_->blocks.size(); ++b)
        if (ptrs_[b]) out.final_blocks.emplace_back(program_->blocks[b].id, sim_->digest(ptrs_[b], program_->blocks[b].size));
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    if (options_.hooks) {
      try {
        options_.hooks->on_end();
      } catch (const std::exception& e) {
        if (out.error.empty()) out.error = e.what();
      }
    }
    if (!out.step_times_ns.empty()) out.step_time_ns = out.step_times_ns.back();
    out.reserved_peak_bytes = allocator_->stats().reserved_peak;
    out.unmapped_accesses = sim_->counters().unmapped_accesses;
    if (executor_) out.executor = executor_->stats();
    if (entry_) {
      try {
        entry_->check_invariants();
        if (options_.report) options_.report(*entry_, out);
      } catch (const std::exception& e) {
        if (out.error.empty()) out.error = e.what();
      }
    }
    return out;
  }

 private:
  StreamHandle stream_of(std::uint64_t trace_stream) const { return streams_.at(trace_stream); }

  void* allocate(std::size_t size, StreamHandle stream) {
    void* ptr = entry_ ? entry_->allocate(size, stream) : allocator_->allocate(size, stream);
    if (options_.hooks) options_.hooks->on_alloc(reinterpret_cast<DevicePtr>(ptr), size, stream);
    return ptr;
  }
  void deallocate(void* ptr) {
    if (options_.hooks) options_.hooks->on_free(reinterpret_cast<DevicePtr>(ptr));
    entry_ ? entry_->deallocate(ptr) : allocator_->deallocate(ptr);
  }

  // An opaque launch shows what a GPU shows: a pointer per block, in the op's order, and a
  // scalar (the op's place).
  void make_opaque(SimLaunch& launch, std::uint64_t scalar) const {
    if (!options_.opaque) return;
    std::vector<DevicePtr> ptrs;
    for (const SimRange& range : launch.reads) ptrs.push_back(range.ptr);
    for (const SimRange& range : launch.writes)
      if (std::find(ptrs.begin(), ptrs.end(), range.ptr) == ptrs.end()) ptrs.push_back(range.ptr);
    launch.params = sim_pack_params(ptrs, scalar);
  }

  // A block's stream: that of its first use (the trace's blocks rarely say), else the first op's.
  StreamHandle block_stream(std::uint32_t b) const {
    const executor::StepBlock& block = program_->blocks[b];
    return stream_of(program_->ops[block.first].stream);
  }

  void allocate_block(std::uint32_t b) {
    if (ptrs_[b]) return;
    const StreamHandle stream = block_stream(b);
    void* ptr = allocate(program_->blocks[b].size, stream);
    ptrs_[b] = reinterpret_cast<DevicePtr>(ptr);
    // Filled from its identity where its bytes are read before anything writes them (state,
    // inputs, a buffer read uninitialised, every block of a recorded trace, whose uses are
    // touches), so every read is defined; the rest are written first by their producer, as in
    // a real step. The fill takes no device time: in the job the first op's kernel writes
    // those bytes, and the trace's time for that op holds it (a timed memset here made the
    // recorded GPT-2 step 9.3 ms slower than the step it records).
    const executor::StepBlock& block = program_->blocks[b];
    // A perturbed program may skip a block's producer: then every block is filled, so that
    // what a later op reads is the same in both runs wherever the allocator placed it.
    if (block.persistent || block.read_first || !block.used || options_.perturb)
      sim_->initialise_async(ptrs_[b], static_cast<std::uint8_t>(mix(program_->blocks[b].id) | 1), program_->blocks[b].size, stream);
  }

  void free_block(std::uint32_t b) {
    if (!ptrs_[b]) return;
    deallocate(reinterpret_cast<void*>(ptrs_[b]));
    ptrs_[b] = 0;
  }

  void launch_op(ProgramRun& out, std::uint32_t iteration, std::uint32_t k) {
    const executor::StepOp& op = program_->ops[k];
    SimLaunch launch;
    launch.name = op.name;
    launch.duration_ns = static_cast<std::uint64_t>(double(op.duration_ns) * slow_);
    launch.seed = mix(k + 1);
    OpRecord record{iteration, k, {}, {}};
    for (const executor::StepUse& use : op.uses) {
      const DevicePtr ptr = ptrs_[use.block];
      if (!ptr) continue;  // a perturbed program may have lost it
      const SimRange range{ptr, program_->blocks[use.block].size};
      if (use.read) {
        launch.reads.push_back(range);
        record.blocks.push_back(program_->blocks[use.block].id);
      }
      if (use.write) launch.writes.push_back(range);
    }
    make_opaque(launch, k);
    reading_ = &record;
    program_kernel_.reset();
    sim_->launch(launch, stream_of(op.stream));
    reading_ = nullptr;
    out.ops.push_back(std::move(record));
    if (timeline_ && program_kernel_) {
      // The program's kernel is the last one its launch issued; those before it were replays.
      timeline_->replays.pop_back();
      timeline_->ops.push_back({k, program_kernel_->start_ns, program_kernel_->end_ns, allocator_->stats().reserved_bytes});
    }
  }

  void observe(const SimDevice::Activity& activity) {
    using Kind = SimDevice::Activity::Kind;
    const std::uint64_t start = activity.start_ns - std::min(activity.start_ns, timeline_start_);
    const std::uint64_t end = activity.end_ns - std::min(activity.end_ns, timeline_start_);
    std::uint64_t bytes = 0;
    for (const SimRange& r : activity.kind == Kind::h2d ? activity.writes : activity.reads) bytes += r.bytes;
    if (activity.kind == Kind::kernel) {
      timeline_->replays.push_back({start, end, 0, false});
      if (reading_) program_kernel_ = ExecutedTimeline::Span{start, end, 0, false};
    } else if (activity.kind == Kind::d2h || activity.kind == Kind::h2d) {
      timeline_->copies.push_back({start, end, bytes, activity.kind == Kind::d2h});
    }
  }

  // An op the trace does not have: reads the op's first input, writes a temporary.
  void extra_op(ProgramRun& out, std::uint32_t iteration, std::uint32_t k) {
    const executor::StepOp& op = program_->ops[k];
    const StreamHandle stream = stream_of(op.stream);
    void* temp = allocate(4096, stream);
    SimLaunch launch;
    launch.name = "perturb.extra";
    launch.duration_ns = 1000;
    launch.seed = mix(~std::uint64_t{k});
    OpRecord record{iteration, k, {}, {}};
    for (const executor::StepUse& use : op.uses) {
      if (!use.read || !ptrs_[use.block]) continue;
      launch.reads.push_back({ptrs_[use.block], program_->blocks[use.block].size});
      record.blocks.push_back(program_->blocks[use.block].id);
      break;
    }
    launch.writes.push_back({reinterpret_cast<DevicePtr>(temp), 4096});
    make_opaque(launch, k);
    reading_ = &record;
    program_kernel_.reset();
    sim_->launch(launch, stream);
    reading_ = nullptr;
    if (timeline_ && program_kernel_) timeline_->replays.pop_back();  // the program's, not a replay
    out.ops.push_back(std::move(record));
    deallocate(temp);
  }

  const trace::Trace& trace_;
  const executor::StepProgram* program_;  // the shape of the iteration running
  ProgramOptions options_;
  std::shared_ptr<Device> device_;
  SimDevice* sim_ = nullptr;
  std::unique_ptr<CachingAllocator> allocator_;
  std::unique_ptr<executor::EntryPoints> entry_;
  executor::Executor* executor_ = nullptr;  // entry_, under a plan
  std::unique_ptr<executor::SimLaunchRoute> route_;
  ExecutedTimeline* timeline_ = nullptr;  // recording the last iteration
  std::uint64_t timeline_start_ = 0;
  std::optional<ExecutedTimeline::Span> program_kernel_;
  std::map<std::uint64_t, StreamHandle> streams_;
  std::vector<DevicePtr> ptrs_;
  OpRecord* reading_ = nullptr;
  double slow_ = 1.0;  // this iteration's kernels: their traced time times this
};

}  // namespace

ProgramRun run_program(const trace::Trace& trace, const executor::StepProgram& program, const plan::Plan* plan,
                       const ProgramOptions& options) {
  if (options.iterations == 0) throw std::invalid_argument("--iterations must be at least 1");
  if (!options.shapes.empty()) {
    if (plan) throw std::invalid_argument("a program of several shapes runs without a plan");
    if (options.shape_of_iteration.size() != options.iterations)
      throw std::invalid_argument("the shapes name " + std::to_string(options.shape_of_iteration.size()) + " iterations, not " +
                                  std::to_string(options.iterations));
    for (std::uint32_t s : options.shape_of_iteration)
      if (s >= options.shapes.size() || options.shapes[s]->blocks.size() != program.blocks.size() ||
          options.shapes[s]->ops.size() != program.ops.size())
        throw std::invalid_argument("shape " + std::to_string(s) + " is not a shape of the program");
  }
  if (options.slow_from != 0 && !(options.slow_factor > 0))
    throw std::invalid_argument("the kernels' slow-down factor must be positive");
  Program run(trace, program, plan, options);
  return run.run();
}

Comparison compare_runs(const ProgramRun& reference, const ProgramRun& run) {
  Comparison c;
  const std::size_t n = std::min(reference.ops.size(), run.ops.size());
  for (std::size_t i = 0; i < n; ++i) {
    const OpRecord& a = reference.ops[i];
    const OpRecord& b = run.ops[i];
    for (std::size_t r = 0; r < a.blocks.size(); ++r) {
      if (b.op != a.op || r >= b.digests.size() || r >= a.digests.size() || a.digests[r] != b.digests[r]) {
        c.first_mismatch = "iteration " + std::to_string(a.iteration + 1) + ", op " + std::to_string(a.op) + ", block " +
                           std::to_string(a.blocks[r]);
        return c;
      }
    }
  }
  if (reference.ops.size() != run.ops.size()) {
    c.first_mismatch = "the runs ran " + std::to_string(reference.ops.size()) + " and " + std::to_string(run.ops.size()) + " ops";
    return c;
  }
  if (reference.final_blocks != run.final_blocks) {
    c.first_mismatch = "the blocks live at the end";
    for (std::size_t i = 0; i < std::min(reference.final_blocks.size(), run.final_blocks.size()); ++i)
      if (reference.final_blocks[i] != run.final_blocks[i]) {
        c.first_mismatch = "the end, block " + std::to_string(reference.final_blocks[i].first);
        break;
      }
    return c;
  }
  c.identical = true;
  return c;
}

}  // namespace delta::execute
