# The DRA driver's NodePrepareResources / NodeUnprepareResources (issue 30) against the device plugin's
# Allocate for the same chips, one call at a time over unix sockets, on an emulated Atlas 800T A2 with the API
# server stand-in (tests/support) holding the ResourceClaims; floors in the same run: an empty gRPC call, the
# claim's GET alone, a checkpoint write. Then the vNPU phase (--dra-vnpu): claims of one vNPU device prepared and
# unprepared against the seam's create_vnpu + destroy_vnpu and the device plugin's dynamic-vNPU Allocate. See
# dra_bench.cc.
if(TARGET ascend-device-plugin AND TARGET ascend_fake_apiserver AND TARGET ascend_test_grpc_allocate)
  add_executable(dra_bench ${CMAKE_CURRENT_LIST_DIR}/dra_bench.cc)
  target_link_libraries(dra_bench PRIVATE ascend_plugin ascend_npu_backend ascend_npu ascend_fake_apiserver
                                          ascend_test_grpc_allocate)
  target_compile_definitions(dra_bench PRIVATE ASCEND_BIN_DIR="${CMAKE_BINARY_DIR}/bin")
  add_dependencies(dra_bench npu-smi)
endif()
