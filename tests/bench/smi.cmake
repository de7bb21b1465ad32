# npu-smi: `npu-smi info` on the 16-device atlas800t-a3 host (state read + visibility + formatting), the
# state read alone, and the formatting alone.
add_executable(smi_bench ${CMAKE_CURRENT_LIST_DIR}/smi_bench.cc)
target_link_libraries(smi_bench PRIVATE ascend_npu benchmark::benchmark)
target_compile_definitions(smi_bench PRIVATE ASCEND_BIN_DIR="${CMAKE_BINARY_DIR}/bin")
add_dependencies(smi_bench npu-smi ascend_driver_stub)
