# Golden plans: `deltactl plan` with its defaults on every shared trace at every budget the
# docs use, each plan compared byte for byte with the one stored in tests/data/plans/. Any change
# to the planner that changes a plan fails here; an intended one refreshes them all with
# `scripts/refresh-plans` (which runs these cases with DELTA_REFRESH_PLANS=1) and says so in its
# commit. Plans do not depend on the thread count (test_planner_threads), nor on time: the only
# clock in delta's method is the 60 s limit of the LP behind the second start from the bound
# (resnet32 and unet), which cbc solves in seconds.
#
# DELTA_GOLDEN_PLANS: `quick` (the default, what CI runs: every case but densenet121 at 0.6,
# 0.4, 0.3 and 0.2, which take half a minute to two minutes each on two cores), `all`, or `off`.
set(DELTA_GOLDEN_PLANS quick CACHE STRING "Golden-plan cases run by ctest: quick, all or off")
set_property(CACHE DELTA_GOLDEN_PLANS PROPERTY STRINGS quick all off)
if(DELTA_GOLDEN_PLANS STREQUAL "off" OR NOT TARGET deltactl)
  return()
endif()
if(NOT DELTA_GOLDEN_PLANS MATCHES "^(quick|all)$")
  message(FATAL_ERROR "DELTA_GOLDEN_PLANS must be quick, all or off, not '${DELTA_GOLDEN_PLANS}'")
endif()

set(DELTA_GOLDEN_DIR ${PROJECT_SOURCE_DIR}/tests/data/plans)

# delta_golden_plans(NAME TRACE BUDGETS b... [SLOW b...] [FIXTURE f]): one ctest entry per
# budget, planner_golden_NAME_BUDGET, labelled `golden`; SLOW budgets only with `all`.
function(delta_golden_plans name trace)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "FIXTURE" "BUDGETS;SLOW")
  set(budgets ${arg_BUDGETS})
  if(DELTA_GOLDEN_PLANS STREQUAL "all")
    list(APPEND budgets ${arg_SLOW})
  endif()
  foreach(budget ${budgets})
    set(test planner_golden_${name}_${budget})
    add_test(NAME ${test} COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/golden_plan.sh $<TARGET_FILE:deltactl>
             "${trace}" ${budget} ${DELTA_GOLDEN_DIR}/${name}-${budget})
    set_tests_properties(${test} PROPERTIES LABELS golden TIMEOUT 1200)
    if(arg_FIXTURE)
      set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED ${arg_FIXTURE})
    endif()
  endforeach()
endfunction()

# The five DTR logs (Titan V), at the budgets of docs/planner-results.md.
foreach(log lstm resnet32 transformer unet)
  file(GLOB path ${DELTA_TRACES_DIR}/dtr/${log}-*.log)
  delta_golden_plans(${log} "${path}" BUDGETS 0.8 0.6 0.5 0.4 0.3 0.2)
endforeach()
file(GLOB path ${DELTA_TRACES_DIR}/dtr/tv_densenet121-*.log)
delta_golden_plans(densenet121 "${path}" BUDGETS 0.8 0.5 SLOW 0.6 0.4 0.3 0.2)
# The two traces DELTA's recorder took on an H200.
foreach(recorded h200-mlp-recorded h200-gpt2-small-recorded)
  delta_golden_plans(${recorded} ${PROJECT_SOURCE_DIR}/tests/data/${recorded}.json.gz BUDGETS 0.8 0.6 0.5 0.4 0.3 0.2)
endforeach()
# ResNet-18's PyTorch execution trace with its Kineto profile, imported first (the importer is
# plain Python).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(resnet18 ${CMAKE_CURRENT_BINARY_DIR}/golden/resnet18.json.gz)
  file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/golden)
  add_test(NAME planner_golden_import_resnet18
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/importers/to_trace.py
                   ${DELTA_TRACES_DIR}/resnet18_bs128_et.json.gz --kineto ${DELTA_TRACES_DIR}/resnet18_bs128_kineto.json.gz
                   -o ${resnet18})
  set_tests_properties(planner_golden_import_resnet18 PROPERTIES LABELS golden FIXTURES_SETUP golden_resnet18)
  delta_golden_plans(resnet18 ${resnet18} BUDGETS 0.8 0.6 0.5 0.4 0.3 0.2 FIXTURE golden_resnet18)
endif()
