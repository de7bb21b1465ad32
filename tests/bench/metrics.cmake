# The plugin's /metrics with the NPU Exporter metrics (npu_exporter.h) for 16 chips (atlas800t-a3), on the
# emulator and the DCMI backend: collection and text serialization in process, and a whole HTTP scrape of
# the plugin's MetricsServer. Floors in the same run: an empty registry collected and serialized, and an
# HTTP scrape of the plugin's server with nothing attached. See metrics_bench.cc.
if(TARGET ascend-device-plugin)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(METRICS_BENCH_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  add_executable(metrics_bench ${CMAKE_CURRENT_LIST_DIR}/metrics_bench.cc)
  target_link_libraries(metrics_bench PRIVATE ascend_plugin ascend_npu_backend ascend_npu benchmark::benchmark
                                              PkgConfig::METRICS_BENCH_HTTPLIB)
  target_compile_definitions(metrics_bench PRIVATE ASCEND_BIN_DIR="${CMAKE_BINARY_DIR}/bin")
  add_dependencies(metrics_bench npu-smi ascend_driver_stub ascend_dcmi)
endif()
