#!/bin/bash
# CDI, checked by a consumer that is not ours: podman (4.3, which reads specs only from /etc/cdi and
# /var/run/cdi) resolves `--device huawei.com/npu=...` against the spec `ascend-ctk cdi generate` wrote, and
# against the one the .run installs with --cdi, into the container's OCI config. podman cannot start
# containers on these machines, so `podman create` + `podman init` (which writes the bundle's config.json before
# runc refuses to start) is the check. The machine's /etc is never touched: the test runs in a private mount
# namespace with a copy of /etc bound over it.
#
# Expected devices come from the emulated host's own device nodes (stat), not from the spec.
# Usage: cdi_podman_test.sh BIN_DIR RUN_PACKAGE. Exit 77: skipped (not root).
set -euo pipefail
bin=$1 run_pkg=$2
[[ $(id -u) == 0 ]] || {
  echo "skipped: needs root (podman, a mount namespace, the installer)"
  exit 77
}
command -v podman >/dev/null || {
  echo "FAIL: podman is not installed (scripts/deps installs it)" >&2
  exit 1
}
if [[ -z ${ASCEND_CDI_TEST_IN_NS:-} ]]; then
  exec unshare -m --propagation private env ASCEND_CDI_TEST_IN_NS=1 "$0" "$@"
fi

t=$(mktemp -d "${TMPDIR:-/var/tmp}/cdi-podman.XXXXXX")
cleanup() { # podman's mounts under $t (the container's shm) first, then the folder
  awk -v t="$t/" 'index($2, t) == 1 {print $2}' /proc/self/mounts | sort -r | xargs -r umount -l
  rm -rf "$t"
}
trap cleanup EXIT
cp -a /etc "$t/etc"
mount --bind "$t/etc" /etc
rm -rf /etc/cdi
mkdir -p /etc/cdi

fails=0
fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

"$bin/npu-sim" load --root "$t/host" --profile atlas800t-a2 >/dev/null
printf 'host-root: %s\n' "$t/host" >"$t/config.yaml"
mkdir -p "$t/rootfs/bin"
cp /bin/busybox "$t/rootfs/bin/busybox"
ln -s busybox "$t/rootfs/bin/sh"

podman=(podman --root "$t/store" --runroot "$t/run" --storage-driver vfs --cgroup-manager cgroupfs
  --events-backend file)
tar -C "$t/rootfs" -c . | "${podman[@]}" import - localhost/ascend-cdi-test:latest >/dev/null

# node NAME -> "major:minor" of the emulated host's /dev/NAME
node() { stat -c '%Hr:%Lr' "$t/host/dev/$1"; }
management="$(node davinci_manager) $(node devmm_svm) $(node hisi_hdc)"

# create LABEL DEVICE... : prints the devices (major:minor, sorted) and mount destinations of the container's
# config.json, or fails
create() {
  local label=$1 id cfg
  shift
  local args=()
  for d in "$@"; do args+=(--device "huawei.com/npu=$d"); done
  if ! id=$("${podman[@]}" create --network none "${args[@]}" localhost/ascend-cdi-test:latest /bin/sh 2>"$t/err"); then
    echo "podman create failed: $(cat "$t/err")"
    return 1
  fi
  # podman 4.3 resolves CDI devices at init; runc cannot start here, but config.json is written before it runs
  "${podman[@]}" init "$id" >/dev/null 2>"$t/err" || true
  cfg=$(ls "$t"/store/vfs-containers/"$id"/userdata/config.json 2>/dev/null || true)
  if [[ -z $cfg ]]; then
    echo "no config.json for $label: $(cat "$t/err")"
    "${podman[@]}" rm -f "$id" >/dev/null 2>&1 || true
    return 1
  fi
  python3 - "$cfg" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
print("devices", " ".join(sorted(f"{d['major']}:{d['minor']}" for d in c["linux"].get("devices", []))))
allowed = sorted(f"{d['major']}:{d['minor']}" for d in c["linux"]["resources"].get("devices", [])
                 if d.get("allow") and d.get("major") is not None)
print("allowed", " ".join(allowed))
print("mounts", " ".join(sorted(m["destination"] for m in c.get("mounts", []))))
PY
  "${podman[@]}" rm -f "$id" >/dev/null 2>&1 || true
}

# expect LABEL "CHIPS" DEVICE...: the container has exactly those chips' nodes and the management nodes, the
# cgroup allows them, and the driver files are mounted
expect() {
  local label=$1 chips=$2 out want=()
  shift 2
  if ! out=$(create "$label" "$@"); then
    fail "$label: $out"
    return
  fi
  for c in $chips; do want+=("$(node "davinci$c")"); done
  for m in $management; do want+=("$m"); done
  local want_s got_s allowed_s
  want_s=$(printf '%s\n' "${want[@]}" | sort | tr '\n' ' ')
  got_s=$(sed -n 's/^devices //p' <<<"$out" | tr ' ' '\n' | sort | tr '\n' ' ')
  allowed_s=$(sed -n 's/^allowed //p' <<<"$out" | tr ' ' '\n' | sort | tr '\n' ' ')
  [[ $got_s == "$want_s" ]] || fail "$label: devices [$got_s], want [$want_s]"
  [[ $allowed_s == "$want_s" ]] || fail "$label: cgroup allows [$allowed_s], want [$want_s]"
  for m in /usr/local/Ascend/driver/lib64 /usr/local/Ascend/driver/version.info /usr/local/bin/npu-smi; do
    grep -q "^mounts .* $m\( \|$\)" <<<"$out" || fail "$label: $m is not mounted"
  done
  echo "ok: $label"
}

# 1. The spec ascend-ctk writes, in /etc/cdi.
"$bin/ascend-ctk" --config "$t/config.yaml" cdi generate --output /etc/cdi/huawei.com-npu.json
expect "one device (npu=0)" "0" 0
expect "two devices (npu=0, npu=3)" "0 3" 0 3
expect "all" "0 1 2 3 4 5 6 7" all
if out=$(create "unknown device" 8); then
  fail "npu=8 (no such chip) was accepted: $out"
else
  grep -qi "unresolvable CDI devices\|huawei.com/npu=8" <<<"$out" || fail "npu=8: unexpected error: $out"
  echo "ok: npu=8 refused by podman ($out)"
fi
rm -f /etc/cdi/huawei.com-npu.json

# 2. The spec the .run installs with --cdi (default folder /etc/cdi), and its removal by the uninstall.
install_path=$t/Ascend-Docker-Runtime config_dir=$t/ascend-docker-runtime.d
echo '{}' >"$t/daemon.json"
"$run_pkg" --install --quiet "--install-path=$install_path" "--config-dir=$config_dir" \
  "--engine-config=$t/daemon.json"
sed -i "s|^host-root: .*|host-root: $t/host|" "$config_dir/config.yaml"
"$run_pkg" --upgrade --quiet "--install-path=$install_path" --cdi
[[ -f /etc/cdi/huawei.com-npu.json ]] || fail "--cdi did not write /etc/cdi/huawei.com-npu.json"
expect "installed spec (npu=1, npu=6)" "1 6" 1 6
"$install_path/uninstall.sh" --quiet
[[ ! -e /etc/cdi/huawei.com-npu.json ]] || fail "uninstall left /etc/cdi/huawei.com-npu.json"
if out=$(create "after uninstall" 1); then fail "npu=1 still resolves after the uninstall"; else echo "ok: npu=1 unresolvable after the uninstall"; fi

"$bin/npu-sim" unload --root "$t/host" >/dev/null
if ((fails)); then
  echo "$fails check(s) failed" >&2
  exit 1
fi
echo "all CDI checks passed"
