#include "lp_solver.hpp"

#include <cstdlib>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace delta::planner {

std::string find_lp_solver() {
  for (const char* name : {"cbc", "glpsol"}) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "");
    std::string dir;
    while (std::getline(dirs, dir, ':'))
      if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return name;
  }
  return {};
}

namespace {

// CBC: a status line ("Optimal - objective value …", "Infeasible - …", "Stopped on time - …"),
// then "<index> <name> <value> <reduced cost>" for the nonzero columns.
LpOutcome read_cbc(std::istream& in, std::size_t columns) {
  LpOutcome outcome;
  std::string line;
  std::getline(in, line);
  if (line.find("Infeasible") != std::string::npos || line.find("infeasible") != std::string::npos) {
    outcome.status = LpOutcome::Status::infeasible;
    outcome.message = line;
    return outcome;
  }
  outcome.values.assign(columns, 0.0);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string number, name;
    double value = 0;
    if (line.rfind("**", 0) == 0) fields.ignore(2);  // cbc marks columns at a bound
    if (fields >> number >> name >> value && name.size() > 1 && name[0] == 'x') {
      const std::size_t column = std::stoul(name.substr(1));
      if (column < columns) outcome.values[column] = value;
    }
  }
  outcome.status = LpOutcome::Status::solved;
  return outcome;
}

// glpsol -w: "s <kind> <rows> <cols> <status> …", then "j <col> …" rows whose last field but
// one (simplex: status, primal, dual) or last (MIP: value) holds the value, in column order.
LpOutcome read_glpk(std::istream& in, std::size_t columns) {
  LpOutcome outcome;
  outcome.values.assign(columns, 0.0);
  std::string line, kind;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string tag;
    fields >> tag;
    if (tag == "s") {
      std::string rows, cols, status;
      fields >> kind >> rows >> cols >> status;
      if (status == "n" || status == "u") {
        outcome.status = LpOutcome::Status::infeasible;
        outcome.message = "the solver reports no feasible solution";
        return outcome;
      }
    }
    if (tag != "j") continue;
    std::size_t j = 0;
    fields >> j;
    std::vector<std::string> rest;
    for (std::string field; fields >> field;) rest.push_back(field);
    if (j < 1 || j > columns || rest.empty()) continue;
    const std::string& value = kind == "mip" ? rest.back() : rest[rest.size() >= 3 ? 1 : 0];
    outcome.values[j - 1] = std::stod(value);
  }
  outcome.status = LpOutcome::Status::solved;
  return outcome;
}

}  // namespace

LpOutcome solve_lp(const std::function<void(std::ostream&)>& write, std::size_t columns, int seconds) {
  LpOutcome outcome;
  const std::string solver = find_lp_solver();
  if (solver.empty()) {
    outcome.message = "no LP solver found (install coinor-cbc or glpk-utils)";
    return outcome;
  }
  namespace fs = std::filesystem;
  static std::atomic<unsigned> counter{0};
  const fs::path dir = fs::temp_directory_path() / ("delta-lp-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  fs::create_directories(dir);
  const fs::path lp = dir / "problem.lp", solution = dir / "problem.sol";
  {
    std::ofstream out(lp);
    write(out);
  }
  const std::string limit = std::to_string(seconds);
  const std::string command = solver == "cbc"
      ? "cbc " + lp.string() + " sec " + limit + " solve solu " + solution.string() + " > /dev/null 2>&1"
      : "glpsol --lp " + lp.string() + " --tmlim " + limit + " -w " + solution.string() + " > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(solution);
  if (status != 0 || !in) {
    outcome.message = "the solver (" + solver + ") failed";
  } else {
    outcome = solver == "cbc" ? read_cbc(in, columns) : read_glpk(in, columns);
  }
  fs::remove_all(dir);
  return outcome;
}

}  // namespace delta::planner
