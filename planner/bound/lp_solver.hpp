// Solves linear programs written in CPLEX LP format with an external solver binary found on
// PATH (CBC `cbc`, else GLPK `glpsol`); integer programs for a lower bound also with HiGHS,
// through a Python interpreter that has highspy. Shared by the exact MILP baseline and the lower bound
// on overhead. Columns must be named x0 .. x{n-1} and first appear in that order (GLPK numbers
// columns by first appearance): list them all in the objective, with 0 where they cost nothing.
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace delta::planner {

struct LpOutcome {
  enum class Status { solved, infeasible, failed } status = Status::failed;
  bool optimal = false;        // solved to optimality (else the best found within the time limit)
  std::vector<double> values;  // x0 .. x{n-1}; solved only
  std::string message;         // why not, for infeasible and failed
  // proven_bound only: the highest lower bound on the (minimised) objective the solver proved,
  // from its log, whether or not it finished; absent when it proved none.
  std::optional<double> proven_lower_bound;
  std::string solver, solver_version;  // proven_bound only: which solver answered ("HiGHS", "cbc")
};

// The solver's name, or empty when none is installed.
std::string find_lp_solver();

// Writes the LP with `write`, runs the solver for at most `seconds` and reads back the values
// of `columns` columns. With the time limit hit, a solution found so far is returned with
// optimal == false; with none found, the outcome is failed. With `primal_fallback` (linear
// programs), a run that has not reached the optimum in a third of the time is followed by one
// of the other simplex method.
LpOutcome solve_lp(const std::function<void(std::ostream&)>& write, std::size_t columns, int seconds,
                   bool primal_fallback = false);

// For an integer program (a General section): runs it for at most `seconds` (killed soon after
// if it overruns) under HiGHS where a Python interpreter has highspy (DELTA_PYTHON, python3 on
// PATH, the project's venv), else under CBC, and takes the best lower bound it proved (HiGHS's
// dual bound; from CBC's log, the LP relaxation at the root, the root's cuts, the search's
// best possible, or the optimum), less a margin for the solver's tolerances and printed
// precision. GLPK alone or a failed run: no bound.
// `solver`: automatic (HiGHS where available, else cbc) or only the one named (failed, with a
// message, when it is missing).
enum class IntegerSolver { automatic, highs, cbc };
LpOutcome solve_for_lower_bound(const std::function<void(std::ostream&)>& write, int seconds,
                                IntegerSolver solver = IntegerSolver::automatic);

}  // namespace delta::planner
