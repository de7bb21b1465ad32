# A chip fault under a running job to its replacement pod bound (issue 23), against the API server stand-in
# (tests/support), with the Eviction and Binding calls themselves as the floor. See recovery_bench.cc.
if(TARGET ascend_test_served_scheduler AND TARGET ascend_fake_apiserver)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  add_executable(recovery_bench ${CMAKE_CURRENT_LIST_DIR}/recovery_bench.cc)
  target_link_libraries(recovery_bench PRIVATE ascend_test_served_scheduler ascend_fake_apiserver PkgConfig::HTTPLIB)
endif()
