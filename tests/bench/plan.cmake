# Parallelism planner: `plan` for 4096 NPUs over every (tp, pp, dp, v) (see plan_bench.cc).
if(TARGET ascend_topology)
  add_executable(plan_bench ${CMAKE_CURRENT_LIST_DIR}/plan_bench.cc)
  target_link_libraries(plan_bench PRIVATE ascend_topology benchmark::benchmark)
endif()
