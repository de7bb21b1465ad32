# Hardening of every binary the build makes: a stack canary in every function with a local array
# (-fstack-protector-strong), libc calls with a known buffer size checked at run time (_FORTIFY_SOURCE=2;
# it needs the optimiser, so not in Debug), position-independent executables (ASLR for the program itself)
# and full RELRO (the GOT read-only once the loader is done). tests/packaging/elf_hardening_test.sh checks
# the shipped binaries' ELF headers for each of these.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
include(CheckPIESupported)
check_pie_supported()
add_compile_options(-fstack-protector-strong "$<$<NOT:$<CONFIG:Debug>>:-U_FORTIFY_SOURCE>"
                    "$<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>")
add_link_options(-Wl,-z,relro,-z,now)

# A static executable, as a static PIE where the toolchain can make one (glibc's rcrt1.o: Debian's GCC 12
# and clang 14 can), else plain -static (no ASLR for its code).
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_LINK_OPTIONS -static-pie)
check_cxx_source_compiles("int main() { return 0; }" ASCEND_HAVE_STATIC_PIE)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
# A static PIE relocates itself before main (glibc's _dl_relocate_static_pie): ~6 300 relative relocations
# in the shim, ~85 000 instructions of the ~420 000 it ran for a container with no request (issue 25). Packed
# as DT_RELR (-z pack-relative-relocs: binutils 2.38, glibc 2.36) they take ~52 000: the table is a bitmap,
# but each pointer is still rewritten. The code and data stay where ASLR put them. Only where the linker takes
# the flag and a static PIE so linked runs with its pointers relocated (glibc's self-relocation reads DT_RELR).
include(CheckCXXSourceRuns)
# The probe: a pointer in data that only a relocation makes right.
set(_ascend_relr_probe "static int x = 42; int* volatile p = &x; int main() { return *p == 42 ? 0 : 1; }")
set(CMAKE_REQUIRED_LINK_OPTIONS -static-pie -Wl,-z,pack-relative-relocs)
check_cxx_source_runs("${_ascend_relr_probe}" ASCEND_HAVE_STATIC_PIE_RELR)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
# The flag goes with the libraries, at the end of the link line: after the -pie CMake adds for a PIE, which
# would otherwise win and make a dynamic executable.
# --gc-sections drops what nothing reaches from the archives linked whole into a static tool (with the
# runtime's own sources compiled in sections, runtime-hook/CMakeLists.txt): fewer pointers to relocate and
# fewer pages to fault in at every start.
function(ascend_link_static target)
  target_link_options(${target} PRIVATE -Wl,--gc-sections)
  if(ASCEND_HAVE_STATIC_PIE_RELR)
    target_link_libraries(${target} PRIVATE -static-pie -Wl,-z,pack-relative-relocs)
  elseif(ASCEND_HAVE_STATIC_PIE)
    target_link_libraries(${target} PRIVATE -static-pie)
  else()
    target_link_libraries(${target} PRIVATE -static)
  endif()
endfunction()

# The same for a dynamically linked program (the device plugin, whose resident memory counts: issue 25):
# --gc-sections, and DT_RELR where the linker takes the flag and the loader here applies it (glibc 2.36's
# ld.so; an older one refuses such a program: GLIBC_ABI_DT_RELR).
set(CMAKE_REQUIRED_LINK_OPTIONS -Wl,-z,pack-relative-relocs)
check_cxx_source_runs("${_ascend_relr_probe}" ASCEND_HAVE_RELR)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
function(ascend_link_packed target)
  target_link_options(${target} PRIVATE -Wl,--gc-sections)
  if(ASCEND_HAVE_RELR)
    target_link_options(${target} PRIVATE -Wl,-z,pack-relative-relocs)
  endif()
endfunction()
