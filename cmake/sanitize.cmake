# ASCEND_SANITIZE=ON: the whole tree under AddressSanitizer + UndefinedBehaviorSanitizer. scripts/test
# --sanitize builds it in build-asan/ with clang, together with the fuzz targets (ASCEND_FUZZ, which implies
# this option), so that scripts/fuzz reuses the same objects; GCC works too (without the fuzz targets).
# Included before the components so that every target gets the flags.
#
# The shipped tools are linked -static, which ASan cannot be: in this tree
#  - ascend-docker-runtime (and its test build ascend-docker-runtime-testkill), ascend-docker-hook and
#    ascend-ctk are linked dynamically, instrumented, so the root/e2e tests that run them (runc as the
#    engine) check the shim and the hook under the sanitizers;
#  - npu-smi stays static and is not instrumented (built from uninstrumented copies of its two libraries):
#    `npu-sim load` copies it into the emulated host and containers run it, where no sanitizer runtime
#    exists; its code is checked in-process by the npu-smi unit and golden tests, which link the
#    instrumented libraries;
#  - the driver stub (a file the emulated driver tree carries, never loaded by the tests) and the LD_PRELOAD
#    canary of the hook tests are not instrumented.
if(ASCEND_FUZZ)
  set(ASCEND_SANITIZE ON)
endif()
if(NOT ASCEND_SANITIZE)
  return()
endif()
set(ASCEND_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
# After the build type's flags (compile options come later on the command line): -O1 keeps the build and the
# tests fast; line tables give file:line in reports.
add_compile_options(${ASCEND_SANITIZE_FLAGS} -O1)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_options(-gline-tables-only)
else()
  # GCC's -Wmaybe-uninitialized gives false positives under ASan at -O1 (in libstdc++'s <regex>, for one).
  add_compile_options(-g1 -Wno-maybe-uninitialized)
endif()
add_link_options(-fsanitize=address,undefined)

function(ascend_sanitize_fixups)
  foreach(tool ascend-docker-runtime ascend-docker-runtime-testkill ascend-docker-hook ascend-ctk)
    if(TARGET ${tool})
      get_target_property(opts ${tool} LINK_OPTIONS)
      list(REMOVE_ITEM opts -static)
      set_target_properties(${tool} PROPERTIES LINK_OPTIONS "${opts}")
      # cmake/hardening.cmake's ascend_link_static puts -static-pie (or -static) with the libraries: an
      # ASan program linked so crashes before main (SIGSEGV at its first instruction, exit 139).
      get_target_property(libs ${tool} LINK_LIBRARIES)
      list(REMOVE_ITEM libs -static-pie -static)
      set_target_properties(${tool} PROPERTIES LINK_LIBRARIES "${libs}")
    endif()
  endforeach()
  # The emulated libdcmi.so is linked with --no-undefined; instrumented, it needs the sanitizer runtime that
  # only the program loading it provides (dcmi_fuzz, the DCMI tests).
  if(TARGET ascend_dcmi)
    get_target_property(opts ascend_dcmi LINK_OPTIONS)
    list(REMOVE_ITEM opts -Wl,--no-undefined)
    set_target_properties(ascend_dcmi PROPERTIES LINK_OPTIONS "${opts}")
  endif()
  # Leak checking cannot run at the hook's exit (tests/sanitize/hook_sanitizer_options.cc says why).
  target_sources(ascend-docker-hook PRIVATE ${CMAKE_SOURCE_DIR}/tests/sanitize/hook_sanitizer_options.cc)
  set(plain -fno-sanitize=all)
  foreach(lib ascend_common_core ascend_npu_seam ascend_npu_core)
    get_target_property(srcs ${lib} SOURCES)
    get_target_property(dir ${lib} SOURCE_DIR)
    set(abs_srcs)
    foreach(src IN LISTS srcs)
      if(IS_ABSOLUTE ${src})
        list(APPEND abs_srcs ${src})  # generated (driver_files.cc)
      else()
        list(APPEND abs_srcs ${dir}/${src})
      endif()
    endforeach()
    add_library(${lib}_plain STATIC ${abs_srcs})
    # The original's public include folder (the seam's is seam/include).
    target_include_directories(${lib}_plain PUBLIC $<TARGET_PROPERTY:${lib},INTERFACE_INCLUDE_DIRECTORIES>)
    # The original's own include folders and definitions (its private src/, where generated sources such as
    # profile_data.cc find their header; fmt's header-only mode), with those of what it links.
    target_include_directories(${lib}_plain PRIVATE $<TARGET_PROPERTY:${lib},INCLUDE_DIRECTORIES>)
    target_compile_definitions(${lib}_plain PRIVATE $<TARGET_PROPERTY:${lib},COMPILE_DEFINITIONS>)
    target_compile_options(${lib}_plain PRIVATE ${plain})
  endforeach()
  target_link_libraries(ascend_npu_seam_plain PUBLIC ascend_common_core_plain nlohmann_json::nlohmann_json
                                                     Threads::Threads)
  target_link_libraries(ascend_npu_core_plain PUBLIC ascend_npu_seam_plain)
  set_target_properties(npu-smi PROPERTIES LINK_LIBRARIES ascend_npu_core_plain)
  # That replaced the -static-pie that cmake/hardening.cmake puts with the libraries: put it back, or the
  # npu-smi that containers run is dynamic and finds no libc in a busybox image (no NPU rows in its output).
  ascend_link_static(npu-smi)
  # The LD_PRELOAD canary (tests/runtime-hook) is loaded into uninstrumented programs too.
  foreach(t npu-smi ascend_driver_stub hook_preload_canary)
    target_compile_options(${t} PRIVATE ${plain})
    target_link_options(${t} PRIVATE ${plain})
  endforeach()
  # Benchmarks, the docker tests and the real-browser test are not run under the sanitizers (scripts/test).
  set_property(DIRECTORY ${CMAKE_SOURCE_DIR}/tests/bench PROPERTY EXCLUDE_FROM_ALL ON)
  # Nor the churn and kill tests (tests/runtime-hook/churn_test.cc, tests/npu-smi-sim/kill_test.cc): they
  # test the state's locking and commit protocol by running the tools thousands of times, which the
  # sanitizers do not change but slow down tenfold (the exhaustive kill test alone ran for over 10 minutes);
  # the code they run is covered here by the emulator, runc and lifecycle tests.
  foreach(t hook_docker_test packaging_docker_test dashboard_test hook_churn_test npu_kill_test)
    if(TARGET ${t})
      set_target_properties(${t} PROPERTIES EXCLUDE_FROM_ALL ON)
    endif()
  endforeach()
  # What CI runs under the sanitizers (scripts/test --sanitize): the tests of common/, npu-smi-sim/ and
  # runtime-hook/, the code that runs on every container start and handles the container's input. The
  # device plugin's and the scheduler's parsers are covered by the fuzz targets; their other tests run in
  # this tree with `cmake --build build-asan` (all) and ctest, at twice the build time.
  set(ascend_sanitize_tests)
  foreach(dir common npu-smi-sim runtime-hook)
    get_property(targets DIRECTORY ${CMAKE_SOURCE_DIR}/tests/${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      get_target_property(excluded ${t} EXCLUDE_FROM_ALL)
      if(type STREQUAL "EXECUTABLE" AND NOT excluded)
        list(APPEND ascend_sanitize_tests ${t})
      endif()
    endforeach()
  endforeach()
  add_custom_target(sanitize_tests DEPENDS ${ascend_sanitize_tests})
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL ascend_sanitize_fixups)
