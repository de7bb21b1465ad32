# ascend-scheduler serve: filter+prioritize p50/p99 with 5000 nodes (baselines: no nodes, /healthz; through
# cpp-httplib's client and through libcurl reading as kube-scheduler's client does), the first
# filter of a 1024-NPU job on 512 nodes (baseline: topology::place alone), and sustained requests per second
# with the server on one core (floor: /healthz). See scheduler_bench.cc.
if(TARGET ascend_extender_server)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  # libcurl: the pairs' second client, which reads as kube-scheduler's Go client does (libcurl4-openssl-dev
  # comes with prometheus-cpp-dev, which the metrics need).
  find_package(CURL REQUIRED)
  add_executable(scheduler_bench ${CMAKE_CURRENT_LIST_DIR}/scheduler_bench.cc)
  target_link_libraries(scheduler_bench PRIVATE ascend_extender_server PkgConfig::HTTPLIB CURL::libcurl)
  target_compile_definitions(scheduler_bench PRIVATE ASCEND_BIN_DIR="${CMAKE_BINARY_DIR}/bin")
  target_include_directories(scheduler_bench PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
  add_dependencies(scheduler_bench ascend-scheduler)
endif()
