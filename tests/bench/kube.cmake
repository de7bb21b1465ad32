# The kube benchmark (issue 28): pod created to Running on the real node through kube-scheduler with our
# extender, against the default scheduler alone (the plugin allocating in both), and a 4-pod job's time to all
# four bound. Needs root and tests/kube/build-binaries. See kube_bench.cc.
if(TARGET kube_test_support)
  add_executable(kube_bench ${CMAKE_CURRENT_LIST_DIR}/kube_bench.cc)
  target_link_libraries(kube_bench PRIVATE kube_test_support)
  add_dependencies(kube_bench ascend-scheduler ascend-device-plugin ascend-docker-runtime ascend-docker-hook
                   npu-sim npu-smi)
endif()
