# ASCEND_FUZZ=ON: the libFuzzer targets of tests/fuzz, in a tree built with ASan + UBSan (this option turns
# ASCEND_SANITIZE on: cmake/sanitize.cmake). Needs clang. Every library is compiled with coverage
# instrumentation (fuzzer-no-link); only the fuzz targets link libFuzzer's main. Debian's gRPC, protobuf,
# yaml-cpp and prometheus-cpp are GCC builds linked as they are: not instrumented, which is fine (the fuzzers
# aim at our code).
if(NOT ASCEND_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "ASCEND_FUZZ needs clang: configure with -DCMAKE_CXX_COMPILER=clang++-14 (scripts/fuzz)")
endif()
add_compile_options(-fsanitize=fuzzer-no-link)
