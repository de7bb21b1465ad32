# The hook's exec broker (common/exec_broker.h): its start and stop against a bare fork + exit + wait (the
# floor), and a program run through it against run_capture() directly.
add_executable(exec_broker_bench ${CMAKE_CURRENT_LIST_DIR}/exec_broker_bench.cc)
target_link_libraries(exec_broker_bench PRIVATE ascend_common_core benchmark::benchmark)
