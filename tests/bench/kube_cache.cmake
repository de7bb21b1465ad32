# ascend-scheduler serve as a cache of the API server, against the stand-in (tests/support): a deleted pod's
# chips freed in /v1/cluster (floor: a bare informer's DELETED event) and a restart with 5 000 Nodes and
# 20 000 bound pods to /readyz (floor: LIST pods + LIST nodes). See kube_cache_bench.cc.
if(TARGET ascend_test_served_scheduler AND TARGET ascend_fake_apiserver)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  add_executable(kube_cache_bench ${CMAKE_CURRENT_LIST_DIR}/kube_cache_bench.cc)
  target_link_libraries(kube_cache_bench PRIVATE ascend_test_served_scheduler ascend_fake_apiserver PkgConfig::HTTPLIB)
endif()
