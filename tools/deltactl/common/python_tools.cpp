#include "common/python_tools.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

namespace deltactl {
namespace {

// The folder deltactl runs from, read from the kernel rather than argv[0] (which a shell or a
// symlink may have changed).
std::filesystem::path own_folder() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path() : self.parent_path();
}

std::string python_interpreter() {
  if (const char* chosen = std::getenv("DELTA_PYTHON"); chosen && *chosen) return chosen;
  // Installed into a venv (pip), deltactl sits beside that venv's python, which has the
  // importers' and viewers' packages.
  if (const std::filesystem::path beside = own_folder() / "python"; !own_folder().empty() && std::filesystem::exists(beside))
    return beside.string();
  const std::filesystem::path venv = std::filesystem::path(DELTACTL_SOURCE_DIR) / ".venv/bin/python";
  if (std::filesystem::exists(venv)) return venv.string();
  return "python3";
}

}  // namespace

std::filesystem::path tool_file(const std::string& relative) {
  const std::filesystem::path installed = own_folder() / ".." / "share" / "delta" / relative;
  if (!own_folder().empty() && std::filesystem::exists(installed)) return installed.lexically_normal();
  // A build-tree deltactl: the source tree it was built from, when it is still there.
  const std::filesystem::path source = std::filesystem::path(DELTACTL_SOURCE_DIR) / relative;
  if (std::filesystem::exists(source)) return source;
  throw std::runtime_error("deltactl's Python tool " + relative + " is neither at " + installed.lexically_normal().string() +
                           " (installed) nor at " + source.string() + " (the source tree)");
}

void run_python_tool(const std::filesystem::path& script, const std::vector<std::string>& args, const std::string& what) {
  std::vector<std::string> words{python_interpreter(), script.string()};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::cout.flush();  // the tool's messages come after ours
  std::cerr.flush();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(what + ": cannot start " + words[0]);
  if (child == 0) {
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "deltactl: cannot run %s (set DELTA_PYTHON)\n", argv[0]);
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(what + ": " + script.string() + " failed (see its message above)");
}

void run_drawing(const std::filesystem::path& script, const std::filesystem::path& data, const std::string& png,
                 const std::string& html, const std::string& what, const std::filesystem::path& bound) {
  std::vector<std::string> words{data.string()};
  if (!bound.empty()) words.insert(words.end(), {"--bound", bound.string()});
  if (!png.empty()) words.insert(words.end(), {"--png", png});
  if (!html.empty()) words.insert(words.end(), {"--html", html});
  run_python_tool(script, words, what);
}

TemporaryFile::TemporaryFile(const std::string& stem, const std::string& extension)
    : path_(std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(::getpid()) + extension)) {}

TemporaryFile::~TemporaryFile() {
  std::error_code ignored;  // nothing to do about a file already gone
  std::filesystem::remove(path_, ignored);
}

}  // namespace deltactl
