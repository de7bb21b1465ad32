#!/bin/bash
# The .deb (CPack): the same payload as the .run, maintainer scripts that run its install.sh (postinst
# --install, prerm --uninstall), and that payload installing and uninstalling against scratch paths (dpkg -i
# itself would change this machine's /usr and /etc/docker, which tests never do).
# Usage: deb_test.sh BUILD_DIR PATH.run   (exit 77: skipped, not root)
set -euo pipefail
build=$1 run=$2
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (the installer refuses non-root)"; exit 77; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/deb-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

(cd "$build" && cpack -G DEB >"$scratch/cpack.log" 2>&1) || { cat "$scratch/cpack.log"; exit 1; }
deb=$(ls "$build"/ascend-docker-runtime_*.deb)
payload=usr/share/ascend-docker-runtime
dpkg-deb -c "$deb" | awk '{print $NF}' | grep -v '/$' | sed "s|^\./$payload/||" | sort >"$scratch/deb.list"
"$run" --list | awk 'NR > 1 && $NF !~ /\/$/ {print $NF}' | sed 's|^\./||' | sort >"$scratch/run.list"
diff "$scratch/run.list" "$scratch/deb.list" >/dev/null && echo "ok: the .deb holds the .run's payload" ||
  fail "payloads differ: $(diff "$scratch/run.list" "$scratch/deb.list")"
grep -qx "bin/ascend-docker-runtime" "$scratch/deb.list" || fail "no bin/ascend-docker-runtime in $(cat "$scratch/deb.list")"

dpkg-deb -e "$deb" "$scratch/control"
grep -q "/$payload/install.sh --install" "$scratch/control/postinst" || fail "postinst does not run install.sh --install"
grep -q "/$payload/install.sh --uninstall" "$scratch/control/prerm" || fail "prerm does not run install.sh --uninstall"
bash -n "$scratch/control/postinst" && bash -n "$scratch/control/prerm" || fail "a maintainer script is not valid bash"

dpkg-deb -x "$deb" "$scratch/root"
mkdir -p "$scratch/docker"
printf '{}\n' >"$scratch/docker/daemon.json"
args=("--install-path=$scratch/opt/ADR" "--config-dir=$scratch/etc/adr" "--engine-config=$scratch/docker/daemon.json")
"$scratch/root/$payload/install.sh" --install "${args[@]}" --quiet || fail "the .deb's install.sh --install failed"
grep -q '"ascend"' "$scratch/docker/daemon.json" || fail "no runtime in daemon.json after the .deb's install"
"$scratch/root/$payload/install.sh" --uninstall "--install-path=$scratch/opt/ADR" --quiet || fail "uninstall failed"
[[ $(cat "$scratch/docker/daemon.json") == "{}" && ! -e $scratch/opt/ADR ]] || fail "not restored after uninstall"
((failures == 0)) && echo "ok: the .deb's installer installs and uninstalls"
((failures == 0))
