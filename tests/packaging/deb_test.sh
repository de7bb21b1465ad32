#!/bin/bash
# The .deb (CPack): the same payload as the .run, maintainer scripts that run its install.sh (postinst
# --install, prerm --uninstall), that payload installing and uninstalling against scratch paths, and a real
# `dpkg -i` / `dpkg -r` with its defaults, run in a chroot onto an overlay of this machine's root (upper layer
# on a tmpfs, in a private mount namespace) so that the machine's own /usr, /etc and dpkg database are never
# touched.
# Usage: deb_test.sh BUILD_DIR PATH.run   (exit 77: skipped, not root)
set -euo pipefail
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (the installer refuses non-root)"; exit 77; }

# deb_test.sh --dpkg DEB: the dpkg part, in a private mount namespace (see the end of this file).
if [[ ${1:-} == --dpkg ]]; then
  deb=$2
  t=$(mktemp -d "${TMPDIR:-/var/tmp}/deb-dpkg.XXXXXX")
  trap 'umount -R "$t/merged" 2>/dev/null; umount "$t/tmpfs" 2>/dev/null; rm -rf "$t"' EXIT
  mkdir -p "$t/tmpfs" "$t/merged"
  mount -t tmpfs tmpfs "$t/tmpfs"
  mkdir "$t/tmpfs/up" "$t/tmpfs/work"
  mount -t overlay overlay -o "lowerdir=/,upperdir=$t/tmpfs/up,workdir=$t/tmpfs/work" "$t/merged"
  mount -t proc proc "$t/merged/proc"
  mount --rbind /dev "$t/merged/dev"
  r=$t/merged
  failures=0
  fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
  # A machine with Docker configured, and none of ours.
  rm -rf "$r/usr/local/Ascend" "$r/etc/ascend-docker-runtime.d" "$r/etc/docker"
  mkdir -p "$r/etc/docker"
  printf '{\n  "log-level": "warn",\n  "runtimes": {}\n}\n' >"$r/etc/docker/daemon.json"
  cp "$r/etc/docker/daemon.json" "$t/daemon.json.before"
  cp "$deb" "$r/tmp/ascend.deb"
  chroot "$r" dpkg -i /tmp/ascend.deb >"$t/dpkg-i.log" 2>&1 || fail "dpkg -i failed: $(cat "$t/dpkg-i.log")"
  # shellcheck disable=SC2016 # ${Status} is dpkg-query's
  chroot "$r" dpkg-query -W -f='${Status}' ascend-docker-runtime | grep -q "install ok installed" ||
    fail "dpkg does not list the package as installed"
  python3 - "$r/etc/docker/daemon.json" <<'PY' || fail "daemon.json after dpkg -i: $(cat "$r/etc/docker/daemon.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["log-level"] == "warn"
assert d["runtimes"]["ascend"]["path"] == "/usr/local/Ascend/Ascend-Docker-Runtime/ascend-docker-runtime"
PY
  for b in ascend-docker-runtime ascend-docker-hook ascend-ctk uninstall.sh; do
    [[ -x $r/usr/local/Ascend/Ascend-Docker-Runtime/$b ]] || fail "dpkg -i: no $b in the default install path"
  done
  [[ $(stat -c '%a %u' "$r/etc/ascend-docker-runtime.d/config.yaml" 2>/dev/null) == "640 0" ]] ||
    fail "config.yaml: $(stat -c '%a %u' "$r/etc/ascend-docker-runtime.d/config.yaml" 2>&1), want 640 root"
  chroot "$r" dpkg -r ascend-docker-runtime >"$t/dpkg-r.log" 2>&1 || fail "dpkg -r failed: $(cat "$t/dpkg-r.log")"
  cmp -s "$r/etc/docker/daemon.json" "$t/daemon.json.before" ||
    fail "daemon.json after dpkg -r is not as before: $(cat "$r/etc/docker/daemon.json")"
  for gone in usr/local/Ascend/Ascend-Docker-Runtime etc/ascend-docker-runtime.d usr/share/ascend-docker-runtime; do
    [[ ! -e $r/$gone ]] || fail "dpkg -r left /$gone"
  done
  [[ -z $(find "$t/tmpfs/up/usr/local" -type f 2>/dev/null) ]] || fail "dpkg -r left files: $(find "$t/tmpfs/up/usr/local" -type f)"
  ((failures == 0)) && echo "ok: dpkg -i installs with the defaults (daemon.json, install path, config) and dpkg -r restores daemon.json byte for byte"
  exit $((failures != 0))
fi

build=$1 run=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/deb-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

(cd "$build" && cpack -G DEB >"$scratch/cpack.log" 2>&1) || { cat "$scratch/cpack.log"; exit 1; }
deb=$(ls "$build"/ascend-docker-runtime_*.deb)
payload=usr/share/ascend-docker-runtime
dpkg-deb -c "$deb" | awk '{print $NF}' | grep -v '/$' | sed "s|^\./$payload/||" | sort >"$scratch/deb.list"
"$run" --list | awk 'NR > 1 && $NF !~ /\/$/ {print $NF}' | sed 's|^\./||' | sort >"$scratch/run.list"
if diff "$scratch/run.list" "$scratch/deb.list" >/dev/null; then echo "ok: the .deb holds the .run's payload"; else
  fail "payloads differ: $(diff "$scratch/run.list" "$scratch/deb.list")"
fi
grep -qx "bin/ascend-docker-runtime" "$scratch/deb.list" || fail "no bin/ascend-docker-runtime in $(cat "$scratch/deb.list")"

dpkg-deb -e "$deb" "$scratch/control"
grep -q "/$payload/install.sh --install" "$scratch/control/postinst" || fail "postinst does not run install.sh --install"
grep -q "/$payload/install.sh --uninstall" "$scratch/control/prerm" || fail "prerm does not run install.sh --uninstall"
bash -n "$scratch/control/postinst" || fail "postinst is not valid bash"
bash -n "$scratch/control/prerm" || fail "prerm is not valid bash"

dpkg-deb -x "$deb" "$scratch/root"
mkdir -p "$scratch/docker"
printf '{}\n' >"$scratch/docker/daemon.json"
args=("--install-path=$scratch/opt/ADR" "--config-dir=$scratch/etc/adr" "--engine-config=$scratch/docker/daemon.json")
"$scratch/root/$payload/install.sh" --install "${args[@]}" --quiet || fail "the .deb's install.sh --install failed"
grep -q '"ascend"' "$scratch/docker/daemon.json" || fail "no runtime in daemon.json after the .deb's install"
"$scratch/root/$payload/install.sh" --uninstall "--install-path=$scratch/opt/ADR" --quiet || fail "uninstall failed"
[[ $(cat "$scratch/docker/daemon.json") == "{}" && ! -e $scratch/opt/ADR ]] || fail "not restored after uninstall"
((failures == 0)) && echo "ok: the .deb's installer installs and uninstalls"
unshare -m --propagation private "$0" --dpkg "$deb" || fail "dpkg -i / dpkg -r (above)"
((failures == 0))
