#!/bin/bash
# The installer inside Ascend-docker-runtime_<version>_linux-<arch>.run and the .deb (see packaging/README.md).
# Installed beside the binaries as uninstall.sh, where it uninstalls that install. See usage() for the options.
#
# State: <install-path>/install-info (key=value) is written first, before anything else changes, and holds the
# original engine config's checksum (its bytes in engine-config.orig), so that a kill at any step leaves an
# install that the same command completes, and an uninstall that restores the engine config byte for byte.
set -euo pipefail
umask 022

readonly VERSION_FILE_NAME=VERSION
readonly DEFAULT_INSTALL_PATH=/usr/local/Ascend/Ascend-Docker-Runtime
readonly DEFAULT_CONFIG_DIR=/etc/ascend-docker-runtime.d
readonly BINARIES=(ascend-docker-runtime ascend-docker-hook ascend-ctk ascend-dcmi-query)
readonly CDI_FILE_NAME=huawei.com-npu.json
readonly RUNTIME_NAME=ascend
# containerd's runc shim passes no arguments to the runtime: with a config folder other than the default, its
# BinaryName is this wrapper, which adds --config (one exec of /bin/sh per runtime call).
readonly CONTAINERD_WRAPPER=ascend-docker-runtime-containerd

# Exit codes (also in usage()).
readonly E_FAILED=1 E_USAGE=2 E_REFUSED=3

self=$(readlink -f "$0")
here=$(dirname "$self")
prog=Ascend-docker-runtime
[[ $(basename "$0") == uninstall.sh ]] && prog=uninstall.sh
version=$(cat "$here/$VERSION_FILE_NAME" 2>/dev/null || echo unknown)

usage() {
  cat <<EOF
Ascend Docker Runtime $version installer

Usage: $prog ACTION [OPTION]...
Actions (exactly one):
  --install               install (over an existing install: upgrade)
  --upgrade               upgrade an existing install (binaries replaced, edited config files kept)
  --uninstall             remove every installed file and restore the engine config
  --version               print the version
  -h, --help              this text
Options (each at most once):
  --install-path=DIR      where the binaries go (default $DEFAULT_INSTALL_PATH); absolute, not a
                          symlink, owned by root and not writable by group or others
  --install-scene=SCENE   docker (default) or containerd; isula is not supported
  --engine-config=FILE    the engine's config (default /etc/docker/daemon.json, /etc/containerd/config.toml)
  --config-dir=DIR        config.yaml and the mount lists (default $DEFAULT_CONFIG_DIR)
  --cdi[=DIR]             also write the CDI spec of this host's NPUs, DIR/$CDI_FILE_NAME (default /etc/cdi)
  --reload-engine         reload the engine when done: SIGHUP to dockerd (its pid file, default
                          /var/run/docker.pid, or \$ASCEND_DOCKER_PIDFILE); restart containerd: systemd's
                          unit when active, else the process in \$ASCEND_CONTAINERD_PIDFILE (default
                          /run/containerd/containerd.pid), started again with the same command line
  --quiet                 print only errors
Uninstall reads the scene, paths and engine config from the install; it takes --install-path and --quiet.

Exit codes: 0 done; $E_FAILED a step failed (run the same command again to complete it); $E_USAGE bad usage
(unknown, repeated or missing option, two actions); $E_REFUSED refused, nothing changed (not root, unsafe
install path, malformed engine config, nothing installed, unsupported scene, no NPU host for --cdi).
EOF
}

die() { # code message
  echo "$prog: $2" >&2
  exit "$1"
}
say() { [[ $quiet == 1 ]] || echo "$@"; }

# A test switch: ASCEND_INSTALL_ABORT_AT=<step> kills the installer (SIGKILL, as a power cut would) when it
# reaches that step, before the step's write.
step() {
  [[ ${ASCEND_INSTALL_ABORT_AT:-} == "$1" ]] && kill -9 $$
  return 0
}

# ---------------------------------------------------------------------------------------------- arguments
action='' cdi_dir='' install_path='' scene='' engine_config='' config_dir='' cdi=0 reload=0 quiet=0
declare -A seen=()
once() {
  [[ -z ${seen[$1]:-} ]] || die $E_USAGE "option $1 given twice"
  seen[$1]=1
}
set_action() {
  [[ -z $action ]] || die $E_USAGE "two actions: --$action and --$1"
  action=$1
}
for arg in "$@"; do
  name=${arg%%=*}
  value=${arg#*=}
  [[ $arg == *=* ]] || value=
  case "$arg" in
    --install | --upgrade | --uninstall | --version | --help | -h) once "$name"; set_action "${name#--}" ;;
    --install-path=*) once "$name"; install_path=$value ;;
    --install-scene=*) once "$name"; scene=$value ;;
    --engine-config=*) once "$name"; engine_config=$value ;;
    --config-dir=*) once "$name"; config_dir=$value ;;
    --cdi | --cdi=*) once --cdi; cdi=1; cdi_dir=${value:-/etc/cdi} ;;
    --reload-engine) once "$name"; reload=1 ;;
    --quiet) once "$name"; quiet=1 ;;
    *) die $E_USAGE "unknown option '$arg' (see --help)" ;;
  esac
done
if [[ -z $action && $(basename "$0") == uninstall.sh ]]; then
  action=uninstall
  [[ -n $install_path ]] || install_path=$here
fi
case "$action" in
  help | -h) usage; exit 0 ;;
  version) echo "$version"; exit 0 ;;
  "") die $E_USAGE "no action: give --install, --upgrade or --uninstall (see --help)" ;;
esac
if [[ $action == uninstall ]]; then
  for o in --install-scene --engine-config --config-dir --cdi; do
    [[ -z ${seen[$o]:-} ]] || die $E_USAGE "$o does not apply to --uninstall (the install recorded it)"
  done
fi

# --------------------------------------------------------------------------------------------- refusals
[[ $(id -u) == 0 ]] || die $E_REFUSED "must run as root"

# An absolute, existing-or-creatable directory that no one but root can change.
check_dir() { # option path
  local p=$2
  [[ $p == /* ]] || die $E_REFUSED "$1=$p: not an absolute path"
  [[ ! -L $p ]] || die $E_REFUSED "$1=$p: is a symlink"
  if [[ -e $p ]]; then
    [[ -d $p ]] || die $E_REFUSED "$1=$p: not a directory"
    local owner mode
    owner=$(stat -c %u "$p")
    mode=$(stat -c %a "$p")
    [[ $owner == 0 ]] || die $E_REFUSED "$1=$p: owned by uid $owner, not root"
    ((0$mode & 022)) && die $E_REFUSED "$1=$p: writable by group or others (mode $mode)"
  fi
  return 0
}
: "${install_path:=$DEFAULT_INSTALL_PATH}"
install_path=${install_path%/}
check_dir --install-path "$install_path"
info=$install_path/install-info
backup=$install_path/engine-config.orig

declare -A old=()
if [[ -f $info ]]; then
  while IFS='=' read -r k v; do [[ -n $k ]] && old[$k]=$v; done <"$info"
fi
installed=0
[[ -n ${old[state]:-} ]] && installed=1

if [[ $action == uninstall ]]; then
  ((installed)) || die $E_REFUSED "nothing installed at $install_path (no install-info)"
  scene=${old[scene]} engine_config=${old[engine_config]} config_dir=${old[config_dir]}
else
  if [[ $action == upgrade ]] && ! ((installed)); then
    die $E_REFUSED "nothing installed at $install_path to upgrade; use --install"
  fi
  # An upgrade keeps what the install chose unless told otherwise.
  : "${scene:=${old[scene]:-docker}}"
  case "$scene" in
    docker | containerd) ;;
    isula) die $E_REFUSED "--install-scene=isula is not supported (docker or containerd)" ;;
    *) die $E_USAGE "--install-scene=$scene: must be docker or containerd" ;;
  esac
  if ((installed)) && [[ $scene != "${old[scene]}" ]]; then
    die $E_REFUSED "installed for ${old[scene]}; uninstall first to change the scene to $scene"
  fi
  default_engine=/etc/docker/daemon.json
  [[ $scene == containerd ]] && default_engine=/etc/containerd/config.toml
  : "${engine_config:=${old[engine_config]:-$default_engine}}"
  : "${config_dir:=${old[config_dir]:-$DEFAULT_CONFIG_DIR}}"
  config_dir=${config_dir%/}
  [[ $engine_config == /* ]] || die $E_REFUSED "--engine-config=$engine_config: not an absolute path"
  check_dir --config-dir "$config_dir"
  if ((installed)); then
    for k in engine_config config_dir; do
      [[ ${!k} == "${old[$k]}" ]] || die $E_REFUSED "installed with ${k//_/-} ${old[$k]}; uninstall first to change it"
    done
  fi
  for b in "${BINARIES[@]}"; do [[ -x $here/bin/$b ]] || die $E_FAILED "the package lacks bin/$b"; done
fi
cdi_file=${old[cdi_file]:-} # an upgrade keeps the CDI spec up to date
if ((cdi)); then
  [[ $cdi_dir == /* ]] || die $E_REFUSED "--cdi=$cdi_dir: not an absolute path"
  cdi_file=$cdi_dir/$CDI_FILE_NAME
fi
[[ -n $cdi_file ]] && cdi=1

sha() { if [[ -f $1 ]]; then sha256sum "$1" | cut -d' ' -f1; else echo absent; fi; }

ctk=$here/bin/ascend-ctk
[[ $action == uninstall ]] && ctk=$install_path/ascend-ctk
ctk_args() { # configure|unconfigure
  local -a a=(runtime "$1" --runtime "$scene" --file "$engine_config" --name "$RUNTIME_NAME")
  if [[ $1 == configure ]]; then
    if [[ $config_dir == "$DEFAULT_CONFIG_DIR" ]]; then
      a+=(--runtime-path "$install_path/ascend-docker-runtime")
    elif [[ $scene == docker ]]; then
      a+=(--runtime-path "$install_path/ascend-docker-runtime")
      a+=("--runtime-arg=--config" "--runtime-arg=$config_dir/config.yaml")
    else
      a+=(--runtime-path "$install_path/$CONTAINERD_WRAPPER")
    fi
  fi
  printf '%s\n' "${a[@]}"
}
# A malformed engine config is refused now, before anything changes; ascend-ctk names the file and position.
if [[ $action != uninstall ]]; then
  mapfile -t args < <(ctk_args configure)
  if ! out=$("$ctk" "${args[@]}" --dry-run 2>&1 >/dev/null); then
    die $E_REFUSED "${out#ascend-ctk: }"
  fi
fi

# So is a CDI spec that cannot be generated (no NPU host at the config's host-root).
if [[ $action != uninstall ]] && ((cdi)); then
  cdi_config=$here/etc/config.yaml
  [[ -f $config_dir/config.yaml ]] && cdi_config=$config_dir/config.yaml
  if ! out=$("$ctk" --config "$cdi_config" cdi generate --output - 2>&1 >/dev/null); then
    die $E_REFUSED "--cdi: ${out#ascend-ctk: }"
  fi
fi

# ------------------------------------------------------------------------------------------ atomic files
# Writes stdin to $1 through a temporary file in the same folder and a rename; the existing file's mode and
# owner are kept, else $2 (mode) and root.
atomic_write() { # path mode
  local dst=$1 mode=$2 tmp
  tmp=$(mktemp "$dst.tmp.XXXXXX")
  cat >"$tmp"
  if [[ -e $dst ]]; then
    chmod --reference="$dst" "$tmp"
    chown --reference="$dst" "$tmp"
  else
    chmod "$mode" "$tmp"
    chown 0:0 "$tmp"
  fi
  sync -d "$tmp" 2>/dev/null || sync
  mv -f "$tmp" "$dst"
}
atomic_copy() { atomic_write "$1" "$3" <"$2"; } # dst src mode

write_info() { # state
  {
    echo "state=$1"
    echo "version=$version"
    echo "scene=$scene"
    echo "install_path=$install_path"
    echo "config_dir=$config_dir"
    echo "engine_config=$engine_config"
    echo "engine_config_sha256_before=$before"
    echo "engine_config_sha256_after=$after"
    echo "backup=$backup_state"
    echo "cdi_file=$cdi_file"
    for f in "${config_files[@]}"; do echo "default_sha256_${f//[.-]/_}=${new_sha[$f]:-}"; done
    echo "changed=${changed[*]}"
  } | atomic_write "$info" 0644
}

reload_engine() {
  local pidfile pid
  if [[ $scene == docker ]]; then
    pidfile=${ASCEND_DOCKER_PIDFILE:-/var/run/docker.pid}
    pid=$(cat "$pidfile" 2>/dev/null || pidof dockerd 2>/dev/null || true)
    [[ -n $pid ]] || die $E_FAILED "--reload-engine: dockerd is not running (no $pidfile)"
    # shellcheck disable=SC2086 # pidof may name more than one dockerd
    kill -HUP $pid || die $E_FAILED "--reload-engine: SIGHUP to dockerd ($pid) failed"
    say "reloaded dockerd (pid $pid)"
  elif [[ -z ${ASCEND_CONTAINERD_PIDFILE:-} ]] && command -v systemctl >/dev/null &&
    systemctl is-active -q containerd 2>/dev/null; then
    systemctl restart containerd || die $E_FAILED "--reload-engine: systemctl restart containerd failed"
    say "restarted containerd (systemd)"
  else
    restart_containerd "${ASCEND_CONTAINERD_PIDFILE:-/run/containerd/containerd.pid}"
  fi
}

alive() { # pid: running (a zombie is not)
  [[ -r /proc/$1/stat ]] || return 1
  local stat
  stat=$(</proc/"$1"/stat)
  [[ ${stat##*) } != Z* ]]
}

# containerd does not reload its config: outside systemd, stop the one its pid file names and start it again
# with the same command line, folder and log (its stderr, when that is a file), then record the new pid.
restart_containerd() { # pidfile
  local pidfile=$1 pid cwd log new i
  local -a argv
  pid=$(cat "$pidfile" 2>/dev/null || true)
  if ! [[ $pid =~ ^[0-9]+$ ]] || ! alive "$pid"; then
    die $E_FAILED "--reload-engine: containerd is not running (no live pid in $pidfile); start it to apply $engine_config"
  fi
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == containerd ]] ||
    die $E_FAILED "--reload-engine: pid $pid in $pidfile is not containerd"
  mapfile -d '' -t argv <"/proc/$pid/cmdline"
  cwd=$(readlink "/proc/$pid/cwd" || echo /)
  log=$(readlink "/proc/$pid/fd/2" 2>/dev/null || true)
  [[ -f $log ]] || log=/dev/null
  kill -TERM "$pid" || die $E_FAILED "--reload-engine: SIGTERM to containerd ($pid) failed"
  for ((i = 0; i < 200; i++)); do alive "$pid" || break; sleep 0.1; done
  ! alive "$pid" || die $E_FAILED "--reload-engine: containerd (pid $pid) did not stop within 20 s"
  # A background subshell is no process group leader, so setsid execs in place: $! is containerd itself.
  (cd "$cwd" && exec setsid "${argv[@]}" >>"$log" 2>&1 </dev/null) &
  new=$!
  echo "$new" | atomic_write "$pidfile" 0644
  sleep 0.5
  alive "$new" || die $E_FAILED "--reload-engine: containerd exited after its restart (see $log)"
  say "restarted containerd (pid $pid, now $new)"
}

config_files=(config.yaml)
for l in "$here"/etc/*.list "$config_dir"/*.list; do [[ -e $l ]] && config_files+=("$(basename "$l")"); done
mapfile -t config_files < <(printf '%s\n' "${config_files[@]}" | sort -u)
declare -A new_sha=()

# -------------------------------------------------------------------------------------------------- install
do_install() {
  local verb=installed
  ((installed)) && [[ ${old[state]} == installed ]] && verb="upgraded ${old[version]} to"
  changed=()
  if ((installed)); then
    before=${old[engine_config_sha256_before]} backup_state=${old[backup]}
    after=${old[engine_config_sha256_after]}
    # Someone else changed the engine config since: a byte-for-byte restore would lose that change.
    local now
    now=$(sha "$engine_config")
    [[ $after != "" && $now != "$after" && $now != "$before" ]] && backup_state=stale
  else
    before=$(sha "$engine_config") after='' backup_state=none
    [[ $before != absent ]] && backup_state=saved
  fi

  step info
  mkdir -p "$install_path" "$config_dir"
  chmod 0755 "$install_path"
  chmod 0750 "$config_dir"
  if [[ $backup_state == saved && ! -f $backup ]]; then
    atomic_copy "$backup" "$engine_config" 0600
  fi
  write_info installing

  step binaries
  for b in "${BINARIES[@]}"; do atomic_copy "$install_path/$b" "$here/bin/$b" 0755; done
  atomic_copy "$install_path/uninstall.sh" "$self" 0755
  if [[ $scene == containerd && $config_dir != "$DEFAULT_CONFIG_DIR" ]]; then
    printf '#!/bin/sh\nexec %q --config %q "$@"\n' "$install_path/ascend-docker-runtime" "$config_dir/config.yaml" |
      atomic_write "$install_path/$CONTAINERD_WRAPPER" 0755
  fi
  atomic_copy "$install_path/$VERSION_FILE_NAME" "$here/$VERSION_FILE_NAME" 0644
  changed+=(binaries)

  step config
  local f dst want have mode
  for f in "${config_files[@]}"; do
    dst=$config_dir/$f
    mode=0440
    [[ $f == config.yaml ]] && mode=0640
    if [[ $f == config.yaml ]]; then
      sed "s|^# mount-list-dir: .*|mount-list-dir: $config_dir|" "$here/etc/config.yaml" >"$install_path/.new-$f"
    elif [[ -f $here/etc/$f ]]; then
      cp "$here/etc/$f" "$install_path/.new-$f"
    else
      continue # the user's own list: not ours
    fi
    want=$(sha "$install_path/.new-$f")
    new_sha[$f]=$want
    have=$(sha "$dst")
    local shipped=${old[default_sha256_${f//[.-]/_}]:-}
    if [[ $have == absent || $have == "$shipped" || $have == "$want" ]]; then
      atomic_copy "$dst" "$install_path/.new-$f" "$mode"
      chmod "$mode" "$dst"
      chown 0:0 "$dst"
      rm -f "$dst.new"
    else
      atomic_copy "$dst.new" "$install_path/.new-$f" "$mode"
      say "kept $dst (edited); the new default is $dst.new"
    fi
    rm -f "$install_path/.new-$f"
  done
  changed+=(config)

  step engine
  mapfile -t args < <(ctk_args configure)
  "$ctk" "${args[@]}" >/dev/null || die $E_FAILED "configuring $engine_config failed"
  after=$(sha "$engine_config")
  changed+=(engine)

  if ((cdi)); then
    step cdi
    mkdir -p "$(dirname "$cdi_file")"
    "$install_path/ascend-ctk" --config "$config_dir/config.yaml" cdi generate --output "$cdi_file" ||
      die $E_FAILED "writing the CDI spec $cdi_file failed"
    changed+=(cdi)
  fi

  step finish
  write_info installed
  say "$verb Ascend Docker Runtime $version in $install_path ($scene, $engine_config)"
  if ((reload)); then
    reload_engine
  elif [[ $after != "${old[engine_config_sha256_after]:-}" ]]; then
    say "$engine_config changed: reload the engine to apply it (or run again with --reload-engine)"
  else
    say "$engine_config unchanged: no engine reload needed"
  fi
}

# ------------------------------------------------------------------------------------------------ uninstall
do_uninstall() {
  before=${old[engine_config_sha256_before]} after=${old[engine_config_sha256_after]}
  backup_state=${old[backup]}
  cdi_file=${old[cdi_file]}
  local now
  now=$(sha "$engine_config")

  step engine
  if [[ $now == "$before" ]]; then
    : # already as it was
  elif [[ ($now == "$after" || $after == "") && $backup_state == saved && -f $backup ]]; then
    atomic_copy "$engine_config" "$backup" 0644 # byte for byte, as before the install
  elif [[ ($now == "$after" || $after == "") && $backup_state == none ]]; then
    rm -f "$engine_config"
  elif [[ $now != absent ]]; then
    mapfile -t args < <(ctk_args unconfigure)
    "$ctk" "${args[@]}" >/dev/null || die $E_FAILED "removing the runtime from $engine_config failed"
    say "$engine_config changed since the install: removed only the $RUNTIME_NAME runtime"
  fi

  step cdi
  [[ -z $cdi_file ]] || rm -f "$cdi_file"

  step config
  # The /dev/char links the runtime made for the systemd cgroup driver (docs/runtime.md); udev's stay. Before
  # the config goes: it names the host root.
  if [[ -x $ctk && -f $config_dir/config.yaml ]]; then
    "$ctk" --config "$config_dir/config.yaml" system remove-dev-char-symlinks >/dev/null ||
      say "could not remove the /dev/char links the runtime made (see ascend-ctk system --help)"
  fi
  local f key shipped
  for f in "$config_dir"/*; do
    [[ -e $f ]] || continue
    f=$(basename "$f")
    key=${f%.new}
    shipped=${old[default_sha256_${key//[.-]/_}]:-}
    if [[ -n $shipped || $f == *.new ]]; then rm -f "$config_dir/$f"; fi
  done
  # An edited config.yaml is ours too: the install created it.
  rm -f "$config_dir/config.yaml"
  rmdir "$config_dir" 2>/dev/null || say "kept $config_dir (it holds files that are not ours)"

  step binaries
  for b in "${BINARIES[@]}" "$CONTAINERD_WRAPPER" "$VERSION_FILE_NAME" engine-config.orig; do rm -f "$install_path/$b"; done

  step finish
  rm -f "$info" "$install_path/uninstall.sh"
  rmdir "$install_path" 2>/dev/null || true
  rmdir "$(dirname "$install_path")" 2>/dev/null || true
  say "uninstalled Ascend Docker Runtime from $install_path"
  if ((reload)); then reload_engine; else say "reload the engine to drop the runtime"; fi
}

case "$action" in
  install | upgrade) do_install ;;
  uninstall) do_uninstall ;;
esac
