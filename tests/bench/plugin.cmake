# ascend-device-plugin: Allocate latency (p50/p99) with 64 calls in flight against the plugin binary (closed
# loop and bursts on the callback client, and 64 blocking threads), fault-to-Unhealthy latency on a
# ListAndWatch stream, and the plugin's resident memory after 10 000 Allocate calls. Baselines in the same
# run: the plugin's empty RPC under the same load, and a floor server (plugin_bench_floor, a minimal grpc++
# callback server with one empty method, a program of its own linked with gRPC and the generated API only).
# See plugin_bench.cc.
if(TARGET ascend-device-plugin)
  add_executable(plugin_bench_floor ${CMAKE_CURRENT_LIST_DIR}/plugin_bench_floor.cc)
  target_link_libraries(plugin_bench_floor PRIVATE ascend_plugin_proto)
  add_executable(plugin_bench ${CMAKE_CURRENT_LIST_DIR}/plugin_bench.cc)
  target_link_libraries(plugin_bench PRIVATE ascend_plugin ascend_npu_backend ascend_npu benchmark::benchmark)
  target_compile_definitions(plugin_bench PRIVATE ASCEND_BIN_DIR="${CMAKE_BINARY_DIR}/bin"
                                                  ASCEND_BENCH_FLOOR="$<TARGET_FILE:plugin_bench_floor>")
  add_dependencies(plugin_bench plugin_bench_floor ascend-device-plugin npu-smi ascend_driver_stub ascend_dcmi)
endif()
