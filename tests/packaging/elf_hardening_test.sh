#!/bin/bash
# The shipped binaries' ELF headers say they were built hardened (cmake/hardening.cmake), read with readelf:
#   PIE            ELF type DYN (a position-independent executable; static ones are static-pie)
#   full RELRO     a GNU_RELRO segment and BIND_NOW (FLAGS BIND_NOW or FLAGS_1 NOW)
#   stack canary   a __stack_chk_fail reference (dynamic) or definition (static, from libc.a, pulled in
#                  because our code calls it)
#   fortify        __*_chk symbols where the program makes a fortifiable libc call (all of ours do)
# Usage: elf_hardening_test.sh BIN_DIR BINARY...
set -uo pipefail
bin_dir=$1
shift
failed=0
for name in "$@"; do
  f=$bin_dir/$name
  if [[ ! -x $f ]]; then
    echo "FAIL $name: $f is not built"
    failed=1
    continue
  fi
  problems=()
  readelf -hW "$f" | grep -Eq '^ *Type: +DYN ' || problems+=("not PIE ($(readelf -hW "$f" | awk '/Type:/ {print $2}'))")
  readelf -lW "$f" | grep -q 'GNU_RELRO' || problems+=("no GNU_RELRO segment")
  readelf -dW "$f" | grep -Eq '\(FLAGS\) +.*BIND_NOW|\(FLAGS_1\) +.*NOW' || problems+=("no BIND_NOW (partial RELRO only)")
  syms=$(readelf -sW --dyn-syms "$f" 2>/dev/null | awk '{print $8}')
  grep -q '^__stack_chk_fail' <<<"$syms" || problems+=("no __stack_chk_fail: built without a stack protector")
  chk=$(grep -Ec '^__[a-z_]+_chk(@.*)?$' <<<"$(grep -v '^__stack_chk' <<<"$syms")")
  ((chk > 0)) || problems+=("no __*_chk symbol: built without _FORTIFY_SOURCE")
  linkage=dynamic
  readelf -lW "$f" | grep -q 'INTERP' || linkage=static
  [[ $linkage == static ]] && readelf -hW "$f" | grep -Eq '^ *Type: +DYN ' && linkage=static-pie
  if ((${#problems[@]})); then
    (IFS=';'; echo "FAIL $name ($linkage): ${problems[*]}")
    failed=1
  else
    echo "ok   $name ($linkage): PIE, full RELRO, stack protector, $chk fortified calls"
  fi
done
exit $failed
