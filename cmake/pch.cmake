# Precompiled headers: the build's time goes mostly into parsing and instantiating the same few big headers
# (nlohmann/json.hpp, gtest, spdlog and fmt, gRPC) in every source file. The libraries with many sources get
# their own precompiled header (ascend_pch); the tests share one (tests/CMakeLists.txt, ascend_test_pch).
# -DASCEND_PCH=OFF builds without them (to check that every file includes what it uses).
# On by default with clang (the sanitizer and fuzz tree). Off by default with GCC: GCC 12 at -O3 (Release)
# then reports its false -Wstringop-overflow inside libstdc++ for `"literal" + std::string` (the family of
# GCC bug 105329, see CMakeLists.txt) in files that build clean without the precompiled header, which stops
# a build with ASCEND_WERROR.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set(ascend_pch_default ON)
else()
  set(ascend_pch_default OFF)
endif()
option(ASCEND_PCH "Precompile the heavy headers (shorter builds)" ${ascend_pch_default})

# The standard headers most sources use; the precompiled headers start with them.
set(ASCEND_PCH_STD <algorithm> <cstdint> <cstdio> <cstring> <functional> <map> <memory> <optional> <set>
                   <sstream> <string> <string_view> <utility> <vector>)

# ascend_pch(TARGET HEADER...): TARGET's sources are compiled with the standard headers above and HEADER...
# precompiled.
function(ascend_pch target)
  if(ASCEND_PCH)
    target_precompile_headers(${target} PRIVATE ${ASCEND_PCH_STD} ${ARGN})
  endif()
endfunction()

# The libraries with many sources, each with its own precompiled header (called once every target exists).
function(ascend_pch_libraries)
  ascend_pch(ascend_npu_core <nlohmann/json.hpp>)
  ascend_pch(ascend_hook <nlohmann/json.hpp> <spdlog/spdlog.h>)
  foreach(lib ascend_topology ascend_extender)
    if(TARGET ${lib})
      ascend_pch(${lib} <nlohmann/json.hpp>)
    endif()
  endforeach()
  if(TARGET ascend_plugin)
    ascend_pch(ascend_plugin <nlohmann/json.hpp> <spdlog/spdlog.h> <grpcpp/grpcpp.h>)
  endif()
endfunction()

# clang writes the headers' modification times into a precompiled header, which keeps ccache from caching
# the files compiled with it (scripts/build and scripts/configure-asan set ccache's matching sloppiness).
if(ASCEND_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:SHELL:-Xclang -fno-pch-timestamp>")
endif()
