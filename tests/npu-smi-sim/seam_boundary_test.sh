#!/bin/bash
# The device seam is a boundary the build enforces: a component compiled with its own include path (the
# file INCLUDES lists it, one folder a line, as CMake computes it for the component's library) can include
# the seam's headers but not the emulator's. Usage: seam_boundary_test.sh CXX INCLUDES...
set -u
cxx=$1
shift
[[ $# -gt 0 ]] || { echo "FAIL: no include lists given"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
compile() {  # compile FILE INCLUDES HEADER: syntax-checks a TU that includes HEADER; prints the diagnostics
  local args=(-std=c++20 -fsyntax-only -x c++)
  while IFS= read -r d; do [[ -n $d ]] && args+=("-I$d"); done <"$2"
  printf '#include "%s"\nint main() { return 0; }\n' "$3" >"$tmp/probe.cc"
  "$cxx" "${args[@]}" "$tmp/probe.cc" 2>&1
}
for list in "$@"; do
  name=$(basename "$list" .includes)
  # The seam: the interface, its types, the factory, the driver file list, the host models.
  for h in ascend/npu/device_query.h ascend/npu/backend.h ascend/npu/driver_files.h ascend/npu/host_model.h; do
    if out=$(compile "$tmp/probe.cc" "$list" "$h"); then
      echo "ok: $name sees $h"
    else
      echo "FAIL: $name cannot include the seam's $h:"; echo "$out" | head -5; fails=$((fails + 1))
    fi
  done
  # The emulator, its state file and profiles, npu-smi's formats: not on a component's include path.
  for h in ascend/npu/emulator.h ascend/npu/state.h ascend/npu/profiles.h ascend/npu/smi.h ascend/npu/workload.h; do
    out=$(compile "$tmp/probe.cc" "$list" "$h")
    # GCC says "No such file or directory", clang "'HEADER' file not found".
    if [[ $? -ne 0 && ($out == *"$h"*"No such file"* || $out == *"$h"*"file not found"*) ]]; then
      echo "ok: $name cannot include $h"
    else
      echo "FAIL: $name can include the emulator's $h"; fails=$((fails + 1))
    fi
  done
done
[[ $fails -eq 0 ]] && echo "PASS" || { echo "$fails failure(s)"; exit 1; }
