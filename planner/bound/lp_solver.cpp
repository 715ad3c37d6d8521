#include "bound/lp_solver.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
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

// A private directory for the LP and solution files (mkdtemp: fresh, owned by us), removed
// however solving ends.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "delta-lp-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("cannot create a directory for the LP solver in " + pattern);
    path_ = pattern;
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Single-quoted for the shell.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// CBC: a status line ("Optimal - objective value …", "Infeasible - …", "Stopped on time - …",
// "Stopped on time (no integer solution - continuous used) …"), then "<index> <name> <value>
// <reduced cost>" for the nonzero columns, marked "**" when outside their bounds.
LpOutcome read_cbc(std::istream& in, std::size_t columns) {
  LpOutcome outcome;
  std::string status;
  std::getline(in, status);
  if (status.find("nfeasible") != std::string::npos) {
    outcome.status = LpOutcome::Status::infeasible;
    outcome.message = status;
    return outcome;
  }
  if (status.rfind("Optimal", 0) != 0 && status.rfind("Stopped", 0) != 0) {
    outcome.message = "the solver reports: " + status;
    return outcome;
  }
  if (status.find("no integer solution") != std::string::npos) {
    outcome.message = "the solver found no solution in time: " + status;
    return outcome;
  }
  outcome.optimal = status.rfind("Optimal", 0) == 0;
  outcome.values.assign(columns, 0.0);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string number, name;
    double value = 0;
    if (line.rfind("**", 0) == 0) fields.ignore(2);
    if (fields >> number >> name >> value && name.size() > 1 && name[0] == 'x') {
      const std::size_t column = std::stoul(name.substr(1));
      if (column < columns) outcome.values[column] = value;
    }
  }
  outcome.status = LpOutcome::Status::solved;
  return outcome;
}

// glpsol -w: "s bas <rows> <cols> <primal> <dual> <objective>" (simplex; status f feasible, i
// infeasible, n no feasible, u undefined) or "s mip <rows> <cols> <status> <objective>" (o
// optimal, f feasible, n none, u undefined); then "j <col> …" rows whose value is the field
// after the status (simplex) or the last (MIP), columns numbered by first appearance.
LpOutcome read_glpk(std::istream& in, std::size_t columns) {
  LpOutcome outcome;
  outcome.values.assign(columns, 0.0);
  std::string line, kind;
  bool usable = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string tag;
    fields >> tag;
    if (tag == "s") {
      std::string rows, cols, primal, dual;
      fields >> kind >> rows >> cols >> primal >> dual;
      if (primal == "n") {
        outcome.status = LpOutcome::Status::infeasible;
        outcome.message = "the solver reports no feasible solution";
        return outcome;
      }
      usable = primal == "o" || primal == "f";
      outcome.optimal = kind == "mip" ? primal == "o" : primal == "f" && dual == "f";
      if (!usable) {
        outcome.message = "the solver found no solution (status " + primal + ")";
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
  if (!usable) {
    outcome.message = "the solver wrote no status";
    return outcome;
  }
  outcome.status = LpOutcome::Status::solved;
  return outcome;
}

// Less than the proven bound by a margin for the solver's tolerances and printed digits.
double with_margin(double proven) { return proven - 1e-4 * std::max(1.0, std::abs(proven)); }

// CBC's log: "Continuous objective value is X", "Cbc0013I At root node, ... changed objective
// from A to B", "... best possible X ...", "Lower bound: X", "Result - Optimal solution found"
// then "Objective value: X"; "Problem is infeasible" (its linear relaxation) or "Result -
// Problem proven infeasible" (no integer point).
LpOutcome read_cbc_log(std::istream& in) {
  LpOutcome outcome;
  std::optional<double> best;
  auto consider = [&](const std::string& line, const std::string& after) {
    const std::size_t at = line.find(after);
    if (at == std::string::npos) return;
    try {
      const double value = std::stod(line.substr(at + after.size()));
      if (!best || value > *best) best = value;
    } catch (const std::exception&) {
    }
  };
  bool optimal = false;
  for (std::string line; std::getline(in, line);) {
    const bool verdict = line.find("Result - ") == 0 || line.find("Problem is infeasible") == 0;
    if (verdict && line.find("nfeasible") != std::string::npos) {
      outcome.status = LpOutcome::Status::infeasible;
      outcome.message = line;
      return outcome;
    }
    optimal |= line.find("Result - Optimal solution found") == 0;
    consider(line, "Continuous objective value is ");
    if (line.find("Cbc0013I") == 0) consider(line, " to ");
    consider(line, "best possible ");
    consider(line, "Lower bound:");
    if (optimal) consider(line, "Objective value:");
  }
  if (!best) {
    outcome.message = "the solver proved no bound in time";
    return outcome;
  }
  // Logged values are rounded (six significant digits and fewer) and within tolerances.
  outcome.proven_lower_bound = with_margin(*best);
  outcome.optimal = optimal;
  outcome.status = LpOutcome::Status::solved;
  return outcome;
}

// Writes the program to `path`; false, with `error` set, when the file cannot be written.
bool write_program(const std::string& path, const std::function<void(std::ostream&)>& write, std::string& error) {
  std::ofstream out(path);
  write(out);
  if (out) return true;
  error = "cannot write " + path;
  return false;
}

// Solvers check their limit between steps; one long step can overrun it, so the command is
// also killed soon after.
std::string with_deadline(int seconds, const std::string& command) {
  return "timeout -k 5 " + std::to_string(seconds + 30) + " " + command;
}

// HiGHS, through PyPI's highspy: on the lower bound's integer programs it closes gaps cbc
// leaves open (resnet32 at 0.5 of its peak: the optimum, 15.75 ms, in 15 s, where cbc proved
// no more than the linear 15.50 ms in 10 minutes). Run by a Python interpreter that has it;
// exit 3 when it does not. The report: the model status, and the best proved bound.
constexpr const char* kHighsScript = R"PY(import math, sys
try:
    import highspy
except ImportError:
    sys.exit(3)
lp, seconds, report = sys.argv[1], float(sys.argv[2]), sys.argv[3]
h = highspy.Highs()
h.setOptionValue("output_flag", False)
h.setOptionValue("time_limit", seconds)
h.setOptionValue("mip_rel_gap", 0.0)
if h.readModel(lp) not in (highspy.HighsStatus.kOk, highspy.HighsStatus.kWarning):
    sys.exit(4)
h.run()
S = highspy.HighsModelStatus
status = h.getModelStatus()
info = h.getInfo()
integral = any(kind != highspy.HighsVarType.kContinuous for kind in h.getLp().integrality_)
# The dual bound holds where the search ended by a limit or at the optimum; without integer
# columns HiGHS solved an LP, whose optimum is the bound. The program minimises a time that
# cannot be negative, so "infeasible or unbounded" is infeasible.
bound = None
if integral and status in (S.kOptimal, S.kTimeLimit, S.kIterationLimit, S.kInterrupt, S.kSolutionLimit):
    bound = info.mip_dual_bound
elif not integral and status == S.kOptimal:
    bound = info.objective_function_value
with open(report, "w") as out:
    out.write("version %s\n" % h.version())
    out.write("status %s\n" % h.modelStatusToString(status).replace(" ", "_"))
    out.write("infeasible %d\n" % (status in (S.kInfeasible, S.kUnboundedOrInfeasible)))
    out.write("optimal %d\n" % (status == S.kOptimal))
    if bound is not None and math.isfinite(bound):
        out.write("bound %r\n" % bound)
)PY";

// The interpreters tried for HiGHS, in order: DELTA_PYTHON, python3 on PATH, and the
// project's venv (scripts/setup-python installs highspy there).
std::vector<std::string> highs_interpreters() {
  std::vector<std::string> out;
  if (const char* named = std::getenv("DELTA_PYTHON"); named && *named) out.emplace_back(named);
  out.emplace_back("python3");
#ifdef DELTA_PROJECT_VENV_PYTHON
  if (access(DELTA_PROJECT_VENV_PYTHON, X_OK) == 0) out.emplace_back(DELTA_PROJECT_VENV_PYTHON);
#endif
  return out;
}

// The best lower bound HiGHS proves on the integer program in `lp` within `seconds`; nothing
// when no interpreter runs it (none has highspy, or it failed there: the caller falls back to
// cbc). Stopped at its deadline, it fails without a fallback.
std::optional<LpOutcome> bound_with_highs(const std::filesystem::path& dir, const std::string& lp, int seconds) {
  const std::string script = (dir / "highs_bound.py").string(), report = (dir / "highs.report").string();
  {
    std::ofstream out(script);
    out << kHighsScript;
    if (!out) return std::nullopt;
  }
  for (const std::string& python : highs_interpreters()) {
    const std::string command = with_deadline(seconds, quoted(python) + " " + quoted(script) + " " + quoted(lp) + " " +
                                                           std::to_string(seconds) + " " + quoted(report) + " > /dev/null 2>&1");
    const int status = std::system(command.c_str());
    std::ifstream in(report);
    if (!in) {
      // Killed by the deadline or a signal (Ctrl-C): cbc would take as long again.
      const bool killed = !WIFEXITED(status) || WEXITSTATUS(status) == 124 || WEXITSTATUS(status) == 137;
      if (!killed) continue;  // no such interpreter, no highspy there, or it failed: the next
      LpOutcome outcome;
      outcome.solver = "HiGHS";
      outcome.message = "HiGHS ran past its time and was stopped";
      return outcome;
    }
    LpOutcome outcome;
    outcome.solver = "HiGHS";
    std::optional<double> bound;
    bool infeasible = false;
    std::string model_status;
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string key;
      fields >> key;
      if (key == "status") fields >> model_status;
      if (key == "version") fields >> outcome.solver_version;
      if (key == "infeasible") fields >> infeasible;
      if (key == "optimal") fields >> outcome.optimal;
      if (double value = 0; key == "bound" && fields >> value && std::isfinite(value)) bound = value;
    }
    if (infeasible) {
      outcome.status = LpOutcome::Status::infeasible;
      outcome.message = "HiGHS proved the integer program infeasible";
      return outcome;
    }
    if (!bound) {
      outcome.message = "HiGHS proved no bound (" + model_status + ")";
      return outcome;
    }
    outcome.proven_lower_bound = with_margin(*bound);
    outcome.status = LpOutcome::Status::solved;
    return outcome;
  }
  return std::nullopt;
}

}  // namespace

LpOutcome solve_for_lower_bound(const std::function<void(std::ostream&)>& write, int seconds, IntegerSolver solver) {
  LpOutcome outcome;
  ScratchDirectory dir;
  const std::string lp = (dir.path() / "problem.lp").string(), log = (dir.path() / "solver.log").string();
  if (!write_program(lp, write, outcome.message)) return outcome;
  if (solver != IntegerSolver::cbc) {
    if (std::optional<LpOutcome> highs = bound_with_highs(dir.path(), lp, seconds)) return *highs;
    if (solver == IntegerSolver::highs) {
      outcome.message = "HiGHS is not available: no Python interpreter (DELTA_PYTHON, python3, the project's venv) "
                        "imports highspy (scripts/setup-python installs it), or it failed";
      return outcome;
    }
  }
  if (find_lp_solver() != "cbc") {
    outcome.message = "proving a bound of an integer program needs HiGHS (highspy, in the project's venv) or cbc (coinor-cbc)";
    return outcome;
  }
  const std::string command =
      with_deadline(seconds, "cbc " + quoted(lp) + " sec " + std::to_string(seconds) + " solve > " + quoted(log) + " 2>&1");
  (void)std::system(command.c_str());  // killed or not, what the log proved stands
  std::ifstream in(log);
  if (!in) {
    outcome.message = "the solver (cbc) wrote no log";
    return outcome;
  }
  LpOutcome proved = read_cbc_log(in);
  proved.solver = "cbc";
  return proved;
}

LpOutcome solve_lp(const std::function<void(std::ostream&)>& write, std::size_t columns, int seconds, bool primal_fallback) {
  LpOutcome outcome;
  const std::string solver = find_lp_solver();
  if (solver.empty()) {
    outcome.message = "no LP solver found (install coinor-cbc or glpk-utils)";
    return outcome;
  }
  ScratchDirectory dir;
  const std::string lp = (dir.path() / "problem.lp").string(), solution = (dir.path() / "problem.sol").string();
  if (!write_program(lp, write, outcome.message)) return outcome;
  if (solver == "glpsol") {
    const std::string limit = std::to_string(seconds);
    const int status = std::system(with_deadline(seconds, "glpsol --lp " + quoted(lp) + " --tmlim " + limit + " -w " +
                                                              quoted(solution) + " > /dev/null 2>&1")
                                       .c_str());
    std::ifstream in(solution);
    if (status != 0 || !in) {
      outcome.message = "the solver (glpsol) failed";
      return outcome;
    }
    return read_glpk(in, columns);
  }
  // cbc's dual simplex; with primal_fallback, where it has not finished in a third of the time,
  // its primal simplex for the rest. Neither is faster everywhere: the lower bound of GPT2-XL
  // bfloat16 at 0.7 of its peak solved in 182 s by the dual and 19 s by the primal,
  // densenet121's at 0.5 in 68 s and 89 s. Small programs (every one a plan is guided by)
  // finish in the first.
  const int first = primal_fallback && seconds >= 3 ? seconds / 3 : seconds;
  const std::pair<int, const char*> runs[] = {{first, ""}, {seconds - first, "primalsimplex "}};
  for (const auto& [limit, method] : runs) {
    if (limit <= 0) break;
    std::filesystem::remove(solution);
    const std::string command = with_deadline(limit, "cbc " + quoted(lp) + " sec " + std::to_string(limit) + " " + method +
                                                         "solve solu " + quoted(solution) + " > /dev/null 2>&1");
    const int status = std::system(command.c_str());
    std::ifstream in(solution);
    if (status != 0 || !in) {
      outcome.message = "the solver (cbc) failed";
      continue;
    }
    outcome = read_cbc(in, columns);
    if (outcome.optimal || outcome.status == LpOutcome::Status::infeasible) return outcome;
  }
  return outcome;
}

}  // namespace delta::planner
