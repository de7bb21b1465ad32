#!/bin/bash
# The .run installer end to end, as root, against scratch paths only (never /etc/docker or /usr/local):
# refusals change nothing, install/upgrade/uninstall semantics, and a SIGKILL at every step of install and
# uninstall leaves valid files, either old or new, and the same command completes the job.
# Usage: run_installer_test.sh PATH.run   (exit 77: skipped, not root)
set -euo pipefail
run=$1
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (the installer refuses non-root)"; exit 77; }
[[ -f $run ]] || { echo "FAIL: $run not built (cmake --build build --target run-package)"; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 missing (scripts/deps installs it)"; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/run-installer.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

ip=$scratch/opt/Ascend-Docker-Runtime
cd_=$scratch/etc/ascend-docker-runtime.d
daemon=$scratch/docker/daemon.json
common=("--install-path=$ip" "--config-dir=$cd_" "--engine-config=$daemon")
mkdir -p "$scratch/snap"
out=$scratch/snap/out err=$scratch/snap/err
original=$'{"log-level":"warn",\n  "runtimes": {"other": {"path": "/usr/bin/other"}}}\n'

reset() {
  rm -rf "${scratch:?}/opt" "${scratch:?}/etc" "${scratch:?}/docker" "${scratch:?}/cdi"
  mkdir -p "$scratch/docker"
  printf '%s' "$original" >"$daemon"
  chmod 0600 "$daemon"
}
# The whole scratch tree: names, modes, owners and contents.
snapshot() {
  (cd "$scratch" && find . -path ./snap -prune -o -printf '%p %m %u %y\n' | sort &&
    find . -path ./snap -prune -o -type f -exec sha256sum {} + | sort)
}
json_ok() { python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }
runtimes() { python3 -c 'import json,sys; print(" ".join(sorted(json.load(open(sys.argv[1])).get("runtimes",{}))))' "$1"; }
# run_expect CODE PATTERN ARGS...: the exit code and one stderr line matching PATTERN
run_expect() {
  local want=$1 pattern=$2 rc=0
  shift 2
  "$run" "$@" >"$out" 2>"$err" || rc=$?
  if [[ $rc != "$want" ]]; then
    fail "$* exited $rc, want $want: $(cat "$err")"
    return 1
  fi
  if [[ -n $pattern ]] && ! grep -Eq -- "$pattern" "$err"; then
    fail "$*: stderr '$(cat "$err")' does not match '$pattern'"
    return 1
  fi
  if [[ $want != 0 && $(wc -l <"$err") != 1 ]]; then
    fail "$*: not one line on stderr: $(cat "$err")"
    return 1
  fi
  return 0
}

# ------------------------------------------------------------------------------------------- help, version
reset
"$run" --help >"$out" 2>&1 || fail "--help failed"
grep -q -- "--install-scene" "$out" && grep -q "Exit codes" "$out" && pass "--help" ||
  fail "--help lacks the options or exit codes"
ver=$("$run" --version)
[[ $ver =~ ^[0-9]+\.[0-9]+\.[0-9]+$ && $run == *"_${ver}_linux-"* ]] && pass "--version $ver" ||
  fail "--version '$ver' does not match the file name $run"

# ------------------------------------------------------------------------------ refusals change nothing
reset
mkdir -p "$scratch/gw" "$scratch/other" "$scratch/real"
chmod 0775 "$scratch/gw"
chown 65534 "$scratch/other"
ln -s "$scratch/real" "$scratch/link"
printf '{"a": 1,\n "b": }\n' >"$scratch/bad.json"
printf 'version = 2\n[plugins\n' >"$scratch/bad.toml"
before=$(snapshot)
refusals=(
  "2|unknown option|--install --frobnicate"
  "2|given twice|--install --quiet --quiet"
  "2|two actions|--install --uninstall"
  "2|no action|--quiet"
  "3|not an absolute path|--install --install-path=relative/dir"
  "3|is a symlink|--install --install-path=$scratch/link"
  "3|writable by group or others|--install --install-path=$scratch/gw"
  "3|owned by uid 65534|--install --install-path=$scratch/other"
  "3|isula is not supported|--install --install-path=$ip --install-scene=isula"
  "3|bad.json.*line 2|--install --install-path=$ip --config-dir=$cd_ --engine-config=$scratch/bad.json"
  "3|bad.toml.*line 2|--install --install-path=$ip --config-dir=$cd_ --install-scene=containerd --engine-config=$scratch/bad.toml"
  "3|nothing installed.*use --install|--upgrade --install-path=$ip"
  "3|nothing installed|--uninstall --install-path=$ip"
  "3|--cdi: .*no emulated host|--install --install-path=$ip --config-dir=$cd_ --engine-config=$daemon --cdi=$scratch/cdi"
)
for r in "${refusals[@]}"; do
  IFS='|' read -r code pattern args <<<"$r"
  # shellcheck disable=SC2086 # the test's arguments split on spaces
  run_expect "$code" "$pattern" $args && pass "refused ($code): $args"
done
# The .run unpacks into $TMPDIR: give nobody one it can write and execute in (a /tmp mounted noexec, as in
# some containers, would make the unpacked installer fail to start instead of refusing).
nobody_tmp=$(mktemp -d /var/tmp/run-nobody.XXXXXX)
chmod 1777 "$nobody_tmp"
nobody_out=$(su -s /bin/bash nobody -c "TMPDIR=$nobody_tmp $run --install --install-path=$ip" 2>&1) && rc=0 || rc=$?
rm -rf "$nobody_tmp"
[[ $rc == 3 && $nobody_out == *"must run as root"* ]] && pass "refused non-root" ||
  fail "non-root: exit $rc: $nobody_out"
after=$(snapshot)
[[ $after == "$before" ]] && pass "refusals changed nothing" || fail "a refused run changed files: $(diff <(echo "$before") <(echo "$after"))"

# ----------------------------------------------------------------------------------------------- install
reset
run_expect 0 "" --install "${common[@]}" --quiet && [[ ! -s $out ]] && pass "--quiet install prints nothing" ||
  fail "--quiet printed: $(cat "$out")"
for b in ascend-docker-runtime ascend-docker-hook ascend-ctk uninstall.sh; do
  [[ -x $ip/$b && $(stat -c %U "$ip/$b") == root ]] || fail "$ip/$b missing or not root's"
done
file "$ip/ascend-ctk" 2>/dev/null | grep -q "static" || ldd "$ip/ascend-ctk" 2>&1 | grep -q "not a dynamic" ||
  fail "ascend-ctk is not static"
[[ $(stat -c %a "$cd_/config.yaml") == 640 && $(stat -c %a "$cd_/base.list") == 440 ]] && pass "config modes" ||
  fail "config modes $(stat -c %a "$cd_/config.yaml") $(stat -c %a "$cd_/base.list")"
grep -q "^mount-list-dir: $cd_$" "$cd_/config.yaml" || fail "config.yaml does not point at $cd_"
[[ $(runtimes "$daemon") == "ascend other" ]] || fail "runtimes: $(runtimes "$daemon")"
python3 - "$daemon" "$ip" "$cd_" <<'EOF' || fail "daemon.json entry"
import json, sys
d = json.load(open(sys.argv[1]))
rt = d["runtimes"]["ascend"]
assert rt["path"] == sys.argv[2] + "/ascend-docker-runtime", rt
assert rt["runtimeArgs"] == ["--config", sys.argv[3] + "/config.yaml"], rt
assert d["log-level"] == "warn"
EOF
[[ $(stat -c %a "$daemon") == 600 ]] || fail "daemon.json mode not kept: $(stat -c %a "$daemon")"
grep -q "^state=installed$" "$ip/install-info" &&
  grep -q "^engine_config_sha256_before=$(printf '%s' "$original" | sha256sum | cut -d' ' -f1)$" "$ip/install-info" &&
  grep -q "^engine_config_sha256_after=$(sha256sum <"$daemon" | cut -d' ' -f1)$" "$ip/install-info" &&
  grep -q "^version=$ver$" "$ip/install-info" && pass "install-info" || fail "install-info: $(cat "$ip/install-info")"

# ---------------------------------------------------------------------------------- upgrade keeps edits
echo "log-level: debug" >>"$cd_/config.yaml"
edited=$(sha256sum <"$cd_/config.yaml")
run_expect 0 "" --install "${common[@]}" || true
grep -q "reload" "$out" || fail "install says nothing about reloading: $(cat "$out")"
[[ $(sha256sum <"$cd_/config.yaml") == "$edited" && -f $cd_/config.yaml.new ]] && pass "upgrade keeps the edited config.yaml (new default as .new)" ||
  fail "upgrade lost the edit or wrote no .new"
[[ $(runtimes "$daemon") == "ascend other" ]] && pass "one runtime entry after the upgrade" || fail "runtimes $(runtimes "$daemon")"
run_expect 0 "" --upgrade "--install-path=$ip" && grep -q "no engine reload needed" "$out" &&
  pass "--upgrade with nothing new: no reload needed" || fail "--upgrade output: $(cat "$out")"

# --------------------------------------------------------------------------- uninstall is byte for byte
"$ip/uninstall.sh" --quiet || fail "uninstall.sh failed"
[[ $(cat "$daemon"; echo x) == "${original}x" && $(stat -c %a "$daemon") == 600 ]] && pass "daemon.json byte-identical after uninstall" ||
  fail "daemon.json differs after uninstall: $(cat "$daemon")"
[[ ! -e $ip && ! -e $cd_ ]] && pass "every file removed" || fail "left behind: $(find "$ip" "$cd_" 2>/dev/null)"

# --------------------------------------------------------------------- uninstall after the user's change
reset
"$run" --install "${common[@]}" --quiet
python3 - "$daemon" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); d["debug"] = True
open(sys.argv[1], "w").write(json.dumps(d))
EOF
"$run" --uninstall "--install-path=$ip" --quiet
python3 - "$daemon" <<'EOF' && pass "uninstall after a change keeps the change, drops only ascend" || fail "uninstall after a change"
import json, sys
d = json.load(open(sys.argv[1]))
assert d.get("debug") is True and "ascend" not in d.get("runtimes", {}) and "other" in d["runtimes"], d
EOF

# --------------------------------------------------------- a fresh engine config is removed on uninstall
reset
rm -f "$daemon"
"$run" --install "${common[@]}" --quiet && [[ $(runtimes "$daemon") == ascend ]] || fail "install into no daemon.json"
"$run" --uninstall "--install-path=$ip" --quiet
[[ ! -e $daemon ]] && pass "a daemon.json the install created is removed" || fail "daemon.json left: $(cat "$daemon")"

# ----------------------------------------------------------------------------------- kill at every step
# The .run only extracts and runs install.sh: the payload's install.sh, extracted once, saves a second of
# extraction per run.
"$run" --noexec --target "$scratch/payload" >/dev/null 2>&1 || fail "--noexec --target failed"
run=$scratch/payload/install.sh
for s in info binaries config engine finish; do
  reset
  rc=0
  ASCEND_INSTALL_ABORT_AT=$s "$run" --install "${common[@]}" --quiet 2>/dev/null || rc=$?
  [[ $rc == 137 ]] || fail "install abort at $s: exit $rc, want 137 (SIGKILL)"
  json_ok "$daemon" || fail "install killed at $s: daemon.json invalid"
  [[ $(cat "$daemon"; echo x) == "${original}x" || $(runtimes "$daemon") == "ascend other" ]] ||
    fail "install killed at $s: daemon.json neither old nor new"
  for f in "$ip"/* "$cd_"/*; do
    [[ -e $f ]] || continue
    [[ $f != *.tmp.* ]] || fail "install killed at $s: a temporary file stays: $f"
  done
  "$run" --install "${common[@]}" --quiet || fail "install after a kill at $s did not complete"
  grep -q "^state=installed$" "$ip/install-info" && [[ $(runtimes "$daemon") == "ascend other" ]] ||
    fail "install after a kill at $s: not installed"
  # and the uninstall, killed at each of its steps
  rc=0
  ASCEND_INSTALL_ABORT_AT=$s "$run" --uninstall "--install-path=$ip" --quiet 2>/dev/null || rc=$?
  [[ $rc == 137 || $s == info ]] || fail "uninstall abort at $s: exit $rc"
  json_ok "$daemon" || fail "uninstall killed at $s: daemon.json invalid"
  if [[ -e $ip/install-info ]]; then
    "$run" --uninstall "--install-path=$ip" --quiet || fail "uninstall after a kill at $s failed"
  fi
  [[ $(cat "$daemon"; echo x) == "${original}x" && ! -e $ip ]] || fail "uninstall after kill at $s: not restored"
  pass "killed at $s: files valid, old or new; the same command completes"
done

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
