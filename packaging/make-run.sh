#!/bin/bash
# make-run.sh PAYLOAD_DIR OUTPUT.run: the self-extracting installer (makeself) of a staged payload
# (bin/, etc/, install.sh, VERSION). makeself's own stub would take --help, --quiet and any unknown flag for
# itself; a patched copy of its header passes every argument on to install.sh, which refuses what it does not
# know, and extracts silently (install.sh prints what it does).
set -euo pipefail
payload=$1 out=$2
header_src=${MAKESELF_HEADER:-/usr/share/makeself/makeself-header.sh}
[[ -f $header_src ]] || { echo "make-run.sh: $header_src not found (apt-get install makeself)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep -q '^    -h | --help)$' "$header_src" || { echo "make-run.sh: unknown makeself header layout" >&2; exit 1; }
sed -e 's/^    -h | --help)$/    --install|--uninstall|--upgrade|--install-path=*|--install-scene=*|--engine-config=*|--config-dir=*|--reload-engine|--cdi|--version|--quiet|-h|--help)\n\tbreak ;;\n    --makeself-help)/' \
  -e 's/^    -\*)$/    -*)\n\tbreak ;;\n    --makeself-unrecognized)/' \
  -e 's/^verbose=n$/verbose=n\nquiet=y\nnoprogress=y/' \
  "$header_src" >"$work/header.sh"
label="Ascend Docker Runtime $(cat "$payload/VERSION")"
if ! log=$(makeself --header "$work/header.sh" --gzip --nox11 "$payload" "$out" "$label" ./install.sh 2>&1); then
  echo "$log" >&2
  exit 1
fi
echo "built $out"
