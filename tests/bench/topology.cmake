# Topology allocator: whole-job placement of a 1024-NPU job on a 512-node cluster with 30% of the chips busy
# (topo, with first-fit and volcano as baselines in the same run), node-level choose(), and the replay of
# 10 000 jobs on 4096 NPUs (see topology_bench.cc).
if(TARGET ascend_topology)
  add_executable(topology_bench ${CMAKE_CURRENT_LIST_DIR}/topology_bench.cc)
  target_link_libraries(topology_bench PRIVATE ascend_topology ascend_npu benchmark::benchmark)
  target_include_directories(topology_bench PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
endif()
