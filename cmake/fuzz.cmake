# ASCEND_FUZZ=ON: the libFuzzer targets of tests/fuzz, with ASan + UBSan (scripts/fuzz builds them in
# build-fuzz with clang). Every library is compiled with coverage instrumentation (fuzzer-no-link); only the
# fuzz targets link libFuzzer's main. Debian's gRPC, protobuf, yaml-cpp and prometheus-cpp are GCC builds
# linked as they are: not instrumented, which is fine (the fuzzers aim at our code).
if(NOT ASCEND_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "ASCEND_FUZZ needs clang: configure with -DCMAKE_CXX_COMPILER=clang++-14 (scripts/fuzz)")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer -O1 -gline-tables-only)
add_link_options(-fsanitize=address,undefined)
