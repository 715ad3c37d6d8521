#include "profiler/sources/cupti_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace delta::profiler {
namespace {

namespace fs = std::filesystem;

const std::string kMajorName = "libcupti.so." + std::to_string(CUDA_VERSION / 1000);

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// The first loaded object whose file name starts with `prefix`.
std::optional<std::string> loaded_library(const std::string& prefix) {
  struct Search {
    const std::string* prefix;
    std::optional<std::string> found;
  } search{&prefix, std::nullopt};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr || *info->dlpi_name == '\0') return 0;
        const std::string name = fs::path(info->dlpi_name).filename().string();
        if (name.rfind(*s->prefix, 0) != 0) return 0;
        s->found = info->dlpi_name;
        return 1;
      },
      &search);
  return search.found;
}

void add_dir(std::vector<std::string>& out, const fs::path& dir) {
  out.push_back((dir / kMajorName).string());
  out.push_back((dir / "libcupti.so").string());
}

}  // namespace

CuptiSearchInputs cupti_search_inputs_from_process() {
  CuptiSearchInputs in;
  in.explicit_path = env("DELTA_CUPTI_PATH");
  in.loaded_cupti = loaded_library("libcupti.so");
  in.loaded_cudart = loaded_library("libcudart.so");
  for (const char* name : {"CUDA_HOME", "CUDA_PATH"}) {
    if (auto root = env(name)) in.toolkit_roots.push_back(*root);
  }
  in.toolkit_roots.push_back("/usr/local/cuda");
  return in;
}

std::vector<std::string> cupti_candidates(const CuptiSearchInputs& in) {
  std::vector<std::string> out;
  if (in.explicit_path) {
    // An explicit setting is the only place looked at: silently using another CUPTI than the
    // one asked for would be a surprise.
    std::error_code ec;
    if (fs::is_directory(*in.explicit_path, ec)) add_dir(out, *in.explicit_path);
    else out.push_back(*in.explicit_path);
    return out;
  }
  if (in.loaded_cupti) out.push_back(*in.loaded_cupti);
  if (in.loaded_cudart) {
    const fs::path dir = fs::path(*in.loaded_cudart).parent_path();
    add_dir(out, dir);                                          // nvidia/cu13/lib
    add_dir(out, dir.parent_path().parent_path() / "cuda_cupti" / "lib");  // nvidia/cuda_cupti/lib
  }
  for (const std::string& root : in.toolkit_roots) {
    add_dir(out, fs::path(root) / "extras" / "CUPTI" / "lib64");
    add_dir(out, fs::path(root) / "lib64");
  }
  out.push_back(kMajorName);
  out.push_back("libcupti.so");
  return out;
}

std::string describe_cupti_result(CUptiResult result) {
  const char* text = nullptr;
  try {
    const CuptiApi& api = cupti();
    if (api.cuptiGetResultString) api.cuptiGetResultString(result, &text);
  } catch (const CuptiError&) {
  }
  return text ? std::string(text) + " (" + std::to_string(static_cast<int>(result)) + ")"
              : "CUPTI error " + std::to_string(static_cast<int>(result));
}

namespace {

CuptiApi load() {
  const CuptiSearchInputs inputs = cupti_search_inputs_from_process();
  std::string tried;
  void* handle = nullptr;
  std::string opened;
  for (const std::string& candidate : cupti_candidates(inputs)) {
    const bool bare = candidate.find('/') == std::string::npos;
    std::error_code ec;
    if (!bare && !fs::exists(candidate, ec)) continue;
    handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      opened = candidate;
      break;
    }
    const char* why = dlerror();
    tried += "\n  " + candidate + ": " + (why ? why : "cannot be loaded");
  }
  if (!handle) {
    if (inputs.explicit_path) {
      throw CuptiError("DELTA_CUPTI_PATH='" + *inputs.explicit_path + "' holds no loadable " + kMajorName +
                       (tried.empty() ? std::string(" (no such file)") : tried));
    }
    throw CuptiError("record mode needs CUPTI (" + kMajorName +
                     ") and none was found: set DELTA_CUPTI_PATH to the library or its directory, or install "
                     "the CUDA toolkit or the nvidia-cuda-cupti wheel" +
                     (tried.empty() ? std::string() : "; tried:" + tried));
  }

  CuptiApi api;
  api.path = opened;
  auto resolve = [&](auto& slot, const char* name, bool required) {
    using Slot = std::remove_reference_t<decltype(slot)>;
    slot = reinterpret_cast<Slot>(dlsym(handle, name));
    if (!slot && required) throw CuptiError(opened + " lacks " + name + ": it is not CUPTI, or too old");
  };
#define DELTA_RESOLVE(name, required) resolve(api.name, #name, required)
  DELTA_RESOLVE(cuptiGetVersion, true);
  DELTA_RESOLVE(cuptiGetResultString, true);
  DELTA_RESOLVE(cuptiSubscribe, true);
  DELTA_RESOLVE(cuptiUnsubscribe, true);
  DELTA_RESOLVE(cuptiEnableCallback, true);
  DELTA_RESOLVE(cuptiEnableDomain, true);
  DELTA_RESOLVE(cuptiGetTimestamp, true);
  DELTA_RESOLVE(cuptiActivityEnable, true);
  DELTA_RESOLVE(cuptiActivityDisable, true);
  DELTA_RESOLVE(cuptiActivityRegisterCallbacks, true);
  DELTA_RESOLVE(cuptiActivityGetNextRecord, true);
  DELTA_RESOLVE(cuptiActivityFlushAll, true);
  DELTA_RESOLVE(cuptiActivityGetNumDroppedRecords, true);
  DELTA_RESOLVE(cuptiSubscribe_v2, false);
#undef DELTA_RESOLVE

  if (CUptiResult r = api.cuptiGetVersion(&api.version); r != CUPTI_SUCCESS) {
    throw CuptiError(opened + ": cuptiGetVersion failed with code " + std::to_string(static_cast<int>(r)));
  }
  // CUPTI_API_VERSION is major * 10000 + minor * 100 + patch from CUDA 13 on.
  const std::uint32_t built_major = CUPTI_API_VERSION / 10000, loaded_major = api.version / 10000;
  if (loaded_major != built_major) {
    throw CuptiError(opened + " is CUPTI API version " + std::to_string(api.version) + ", but DELTA was built with " +
                     std::to_string(CUPTI_API_VERSION) +
                     "; point DELTA_CUPTI_PATH at the CUPTI of the same CUDA major version");
  }
  return api;
}

}  // namespace

const CuptiApi& cupti() {
  static std::once_flag once;
  static CuptiApi api;
  static std::string failure;
  std::call_once(once, [] {
    try {
      api = load();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw CuptiError(failure);
  return api;
}

}  // namespace delta::profiler
