#!/bin/bash
# deploy/systemd/*.service pass `systemd-analyze verify`, with ExecStart pointed at the built binaries (verify
# checks that the program exists), and keep their hardening. Usage: systemd_verify_test.sh UNIT_DIR BIN_DIR
set -euo pipefail
units=$1 bin=$2
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze is not installed (no systemd)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/systemd-verify.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
for u in "$units"/*.service; do
  name=$(basename "$u")
  for want in NoNewPrivileges=yes ProtectSystem=strict ReadWritePaths= CapabilityBoundingSet=; do
    grep -q "^$want" "$u" || { echo "FAIL: $name lacks $want"; failures=$((failures + 1)); }
  done
  sed "s|/usr/local/bin/|$bin/|" "$u" >"$work/$name"
  if out=$(systemd-analyze verify "$work/$name" 2>&1) && [[ -z $out ]]; then
    echo "ok: $name"
  else
    echo "FAIL: systemd-analyze verify $name:"
    echo "$out"
    failures=$((failures + 1))
  fi
done
((failures == 0))
