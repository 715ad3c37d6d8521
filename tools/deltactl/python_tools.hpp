// deltactl draws its pictures with the project's Python tools (matplotlib, HTML). They run
// with DELTA_PYTHON when set, else the project's venv when scripts/setup made one, else
// python3 from PATH; so the drawings work wherever deltactl was built, venv sourced or not.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace deltactl {

// A path in the source tree deltactl was built from (tools/plots/..., tools/viewers/...).
std::filesystem::path source_file(const std::string& relative);

// Runs `script` with `args` (no shell: any path is safe) and waits. Throws std::runtime_error
// naming `what` when it cannot start or exits with an error (its own message is above).
void run_python_tool(const std::filesystem::path& script, const std::vector<std::string>& args, const std::string& what);

}  // namespace deltactl
