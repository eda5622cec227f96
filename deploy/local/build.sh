# shellcheck shell=bash
# deploy/local/build.sh: `deps` (the Debian packages of packages.txt, installed with apt-get when
# missing) and `build` (configure a tree once with CMake and Ninja, then build it). Sourced by
# stack.sh (not a script of its own); uses lib/common.sh. `up` and `test` build with build_tree.

# ---------------------------------------------------------------------------
# deps

read_packages() { sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$PACKAGES_FILE"; }

missing_packages() {
  local -A have=()
  local st pkg
  while read -r st pkg; do
    [[ $st == ii ]] && have[$pkg]=1
  done < <(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "$@" 2>/dev/null || true)
  for pkg in "$@"; do [[ -n ${have[$pkg]:-} ]] || printf '%s\n' "$pkg"; done
}

cmd_deps() {
  [[ -r $PACKAGES_FILE ]] || die "cannot read $PACKAGES_FILE"
  command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: deps needs Debian 12 (apt/dpkg)"
  local -a pkgs missing sudo=()
  mapfile -t pkgs < <(read_packages)
  mapfile -t missing < <(missing_packages "${pkgs[@]}")
  if (( ${#missing[@]} == 0 )); then
    say "deps: all ${#pkgs[@]} packages of $(rel "$PACKAGES_FILE") are installed"
    return 0
  fi
  say "deps: missing: ${missing[*]}"
  if (( EUID != 0 )); then
    command -v sudo >/dev/null 2>&1 ||
      die "deps: these Debian packages are missing and I am not root and there is no sudo: ${missing[*]}
  install them as root: apt-get install --no-install-recommends ${missing[*]}"
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -q || die "deps: apt-get update failed"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    die "deps: apt-get install failed for: ${missing[*]}"
  mapfile -t missing < <(missing_packages "${pkgs[@]}")
  (( ${#missing[@]} == 0 )) || die "deps: still not installed after apt-get install: ${missing[*]}"
  say "deps: installed; all ${#pkgs[@]} packages present"
}

# ---------------------------------------------------------------------------
# build

# configure_tree DIR CMAKE_ARGS...: configure DIR once (ninja re-runs cmake by
# itself when a CMakeLists.txt changes). Returns non-zero with a message on
# failure; never exits, so that `test` can go on to the next tree.
configure_tree() {
  local dir=$1 gen rc=0
  shift
  if [[ -f $dir/CMakeCache.txt ]]; then
    gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt")
    if [[ $gen != Ninja ]]; then
      printf 'stack: error: %s was configured with generator "%s", not Ninja: remove it or set SHOPMICRO_BUILD_DIR\n' \
        "$(rel "$dir")" "$gen" >&2
      return 1
    fi
  fi
  if [[ ! -f $dir/CMakeCache.txt || ! -f $dir/build.ninja ]]; then
    say "build: configuring $(rel "$dir")"
    cmake -S "$ROOT" -B "$dir" -G Ninja "$@" || rc=$?
    if (( rc != 0 )); then
      printf 'stack: error: BUILD FAILED: cmake configure of %s exited %d (see the output above)\n' "$(rel "$dir")" "$rc" >&2
      return 1
    fi
  fi
}

# ninja_tree DIR [TARGET...]: build DIR (every target, or only those given).
ninja_tree() {
  local dir=$1 rc=0
  shift
  say "build: ninja -C $(rel "$dir") $*"
  ninja -C "$dir" "$@" || rc=$?
  if (( rc != 0 )); then
    printf 'stack: error: BUILD FAILED: ninja -C %s %s exited %d (see the compiler output above)\n' "$(rel "$dir")" "$*" "$rc" >&2
    return 1
  fi
  say "build: $(rel "$dir") ${*:-(all targets)} up to date"
}

# build_tree DIR CMAKE_ARGS...: configure_tree, then build every target.
build_tree() {
  configure_tree "$@" || return 1
  ninja_tree "$1"
}

cmd_build() { build_tree "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo || exit 1; }
