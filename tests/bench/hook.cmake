# ascend-docker-runtime + ascend-docker-hook: `runc run` of /bin/true in a busybox bundle with
# ASCEND_VISIBLE_DEVICES=0-7 and base.list, against the same bundle with no request under plain runc (the
# baseline, in the same run), and the shim's pass-through cost with no request; two floors: runc alone on the
# spec the shim writes (runc's own injection work) and a static program that only execs runc (any shim's cost);
# and, for the shim alone, a static program that makes only the request's system calls.
if(TARGET hook_test_support AND TARGET ascend-docker-runtime)
  add_executable(hook_bench ${CMAKE_CURRENT_LIST_DIR}/hook_bench.cc)
  target_link_libraries(hook_bench PRIVATE hook_test_support benchmark::benchmark)
  target_compile_definitions(hook_bench PRIVATE ASCEND_BIN_DIR="${CMAKE_BINARY_DIR}/bin")
  add_executable(hook_bench_exec_floor ${CMAKE_CURRENT_LIST_DIR}/exec_floor.cc)
  target_link_options(hook_bench_exec_floor PRIVATE -static)
  # The request's system calls and nothing else (request_floor.cc): what the shim's own work on a request
  # cannot go below here.
  add_executable(hook_bench_request_floor ${CMAKE_CURRENT_LIST_DIR}/request_floor.cc)
  target_link_options(hook_bench_request_floor PRIVATE -static)
  target_compile_definitions(hook_bench PRIVATE
                             ASCEND_EXEC_FLOOR="$<TARGET_FILE:hook_bench_exec_floor>"
                             ASCEND_REQUEST_FLOOR="$<TARGET_FILE:hook_bench_request_floor>")
  add_dependencies(hook_bench ascend-docker-runtime ascend-docker-hook ascend-dcmi-query ascend_dcmi npu-sim npu-smi ascend_driver_stub
                   hook_bench_exec_floor hook_bench_request_floor)
endif()
