// deltactl imports traces and draws its pictures with the project's Python tools (importers,
// matplotlib, HTML). They are found beside where deltactl is installed (<prefix>/share/delta,
// for <prefix>/bin/deltactl: a wheel or `cmake --install`), else in the source tree a build-tree
// deltactl was built from. They run with DELTA_PYTHON when set, else the python beside deltactl
// (a venv's bin/), else the project's venv, else python3 from PATH.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace deltactl {

// A Python tool by its path in the source tree (tools/plots/..., tools/importers/...): the
// installed copy, else the source tree's. Throws std::runtime_error naming both places tried.
std::filesystem::path tool_file(const std::string& relative);

// Runs `script` with `args` (no shell: any path is safe) and waits. Throws std::runtime_error
// naming `what` when it cannot start or exits with an error (its own message is above).
void run_python_tool(const std::filesystem::path& script, const std::vector<std::string>& args, const std::string& what);

// Runs a drawing script as `script DATA [--bound BOUND] [--png PNG] [--html HTML]`, leaving out
// empty outputs and an empty `bound` (the lower bounds' JSON lines, for the frontier).
void run_drawing(const std::filesystem::path& script, const std::filesystem::path& data, const std::string& png,
                 const std::string& html, const std::string& what, const std::filesystem::path& bound = {});

// A file in the temporary folder named for this process (`stem-PID.extension`), removed when
// this goes, whether the drawing succeeded or threw.
class TemporaryFile {
 public:
  TemporaryFile(const std::string& stem, const std::string& extension);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace deltactl
