#include "tools/execute/auto_program.hpp"

#include "profiler/sources/sim_source.hpp"

namespace delta::execute {

void run_online(ProgramOptions& options, executor::OnlineOptions online, executor::OnlineStats* stats) {
  options.entry = [online](CachingAllocator& allocator, SimDevice&, std::function<void(const SimDevice::Activity&)>) {
    return std::unique_ptr<executor::EntryPoints>(std::make_unique<executor::OnlinePolicy>(allocator, online));
  };
  options.report = [stats](const executor::EntryPoints& entry, ProgramRun&) {
    *stats = dynamic_cast<const executor::OnlinePolicy&>(entry).stats();
  };
}

void run_auto(ProgramOptions& options, autopilot::AutoOptions automatic, autopilot::AutoReport* report) {
  options.entry = [automatic](CachingAllocator& allocator, SimDevice& sim,
                              std::function<void(const SimDevice::Activity&)> observer) {
    auto record = [&sim, observer](std::uint32_t iterations) {
      profiler::RecorderOptions recorder_options;
      recorder_options.iterations = iterations;
      recorder_options.first_detection_at = static_cast<std::size_t>(-1);  // the program marks every step
      autopilot::AutoPilot::Recording r;
      r.recorder = std::make_unique<profiler::Recorder>(recorder_options, profiler::sim_clock(sim));
      r.recorder->set_gpu({sim.profile().name, sim.profile().name, sim.mem_info().total_bytes});
      auto source = std::make_unique<profiler::SimActivitySource>(sim, *r.recorder);
      source->set_tap(observer);  // the program still sees what each op read
      r.source = std::move(source);
      return r;
    };
    autopilot::AutoOptions o = automatic;
    if (!o.clock) o.clock = [&sim] { return sim.now_ns(); };  // step times on the sim's clock
    return std::unique_ptr<executor::EntryPoints>(std::make_unique<autopilot::AutoPilot>(allocator, std::move(o), record));
  };
  options.report = [report](const executor::EntryPoints& entry, ProgramRun&) {
    *report = dynamic_cast<const autopilot::AutoPilot&>(entry).report();
  };
}

}  // namespace delta::execute
