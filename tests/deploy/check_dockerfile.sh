#!/usr/bin/env bash
# tests/deploy/check_dockerfile.sh: check deploy/compose/Dockerfile against the local build.
# There is no Docker engine on these machines, so the image is never built here. Instead, this
# script checks the Dockerfile's build steps against the local build, which uses the same Debian 12
# packages.
#
#   check_dockerfile.sh [--root DIR] packages
#       Every package of the build stage is in deploy/local/packages.txt, so `stack.sh deps` installs
#       it and the local build uses it. Every package of both stages has a Debian 12 candidate.
#   check_dockerfile.sh [--root DIR] libs NAME=BINARY...
#       The runtime stage's packages and their Depends/Pre-Depends (apt-cache depends --recurse)
#       provide every shared library that ldd reports for each BINARY. Each library is mapped to its
#       package with dpkg -S. A BINARY that is not built fails the check. Every other program the
#       build stage installs (a /build/... path) is checked too, in the build tree of the BINARYs
#       given (found from a BINARY whose /build/... path the stage installs): a program added to
#       the image is covered without a change to the ctest command line (shopmicro-jwt).
#   check_dockerfile.sh [--root DIR] build
#       Copies only the build stage's COPY sources to a temporary folder and runs the stage's
#       commands there: the same cmake configure (its -D flags) and `cmake --build --target` of its
#       target list. Then checks that each /build/... path the stage installs was made. This
#       proves the COPY list is complete and the commands work with the local packages (about 20 s,
#       mostly cmake's configure). A missing COPY source fails it, as it would fail docker build.
#
# Conventions this parser relies on (see the Dockerfile's header): the stages are named `build` and
# `runtime`; `apt-get install` lists package names and options only, up to `&&`; COPY uses the
# shell form. Exit status: 0 pass, 1 fail, 2 usage.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
if [[ ${1:-} == --root ]]; then
  ROOT=$(cd "$2" && pwd -P)
  shift 2
fi
DOCKERFILE="$ROOT/deploy/compose/Dockerfile"
PACKAGES_FILE="$ROOT/deploy/local/packages.txt"

FAILS=0
fail() { printf 'FAIL: %s\n' "$*"; FAILS=$((FAILS + 1)); }
ok()   { printf 'ok:   %s\n' "$*"; }
die()  { printf 'check_dockerfile: error: %s\n' "$*" >&2; exit 2; }

[[ -r $DOCKERFILE ]] || die "cannot read $DOCKERFILE"

# Logical instructions as "<stage>\t<instruction line>": continuation lines joined, and comment
# lines dropped (Docker drops them inside a continuation too).
df_lines() {
  awk '
    /^[[:space:]]*#/ { next }
    {
      line = cont ? line " " $0 : $0
      if (sub(/\\[[:space:]]*$/, "", line)) { cont = 1; next }
      cont = 0
      if (line ~ /^[[:space:]]*$/) next
      sub(/^[[:space:]]+/, "", line)
      if (toupper(line) ~ /^FROM[[:space:]]/) {
        n = split(line, w, /[[:space:]]+/)
        stage = (n >= 4 && toupper(w[3]) == "AS") ? w[4] : "stage" ++anon
      }
      print stage "\t" line
    }' "$DOCKERFILE"
}

# stage_instr STAGE KEYWORD: the arguments of that stage's KEYWORD instructions, one per line.
stage_instr() {
  df_lines | awk -F '\t' -v s="$1" -v k="$2" '
    $1 == s { n = split($2, w, /[[:space:]]+/); if (toupper(w[1]) == k) { sub(/^[^[:space:]]+[[:space:]]+/, "", $2); print $2 } }'
}

# stage_packages STAGE: the package names of every `apt-get install` in that stage's RUNs.
stage_packages() {
  stage_instr "$1" RUN | awk '
    {
      n = split($0, cmds, /&&|;|\|\|/)
      for (i = 1; i <= n; i++) {
        if (cmds[i] !~ /apt-get[[:space:]]+install/) continue
        sub(/.*apt-get[[:space:]]+install/, "", cmds[i])
        m = split(cmds[i], w, /[[:space:]]+/)
        for (j = 1; j <= m; j++) if (w[j] != "" && w[j] !~ /^-/) { sub(/=.*/, "", w[j]); print w[j] }
      }
    }'
}

# stage_after STAGE MARKER: the words after MARKER in the stage's RUN commands, up to && or ;.
# stage_after build --target -> catalog order relay gateway
stage_after() {
  stage_instr "$1" RUN | awk -v m="$2" '
    {
      n = split($0, cmds, /&&|;/)
      for (i = 1; i <= n; i++) {
        k = split(cmds[i], w, /[[:space:]]+/); on = 0
        for (j = 1; j <= k; j++) { if (on && w[j] != "") print w[j]; if (w[j] == m) on = 1 }
      }
    }'
}

# The -D options of the build stage's configure command (the RUN command that runs cmake -S).
stage_configure_defs() {
  stage_instr build RUN | awk '
    {
      n = split($0, cmds, /&&|;/)
      for (i = 1; i <= n; i++) {
        if (cmds[i] !~ /cmake[[:space:]]+-S/) continue
        k = split(cmds[i], w, /[[:space:]]+/)
        for (j = 1; j <= k; j++) if (w[j] ~ /^-D/) print w[j]
      }
    }'
}

read_packages_txt() { sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$PACKAGES_FILE"; }

# missing_candidates PKG...: prints each PKG that has no apt candidate (one apt-cache call).
missing_candidates() {
  local -A cand=()
  local line pkg="" p
  while IFS= read -r line; do
    if [[ $line =~ ^([^[:space:]]+):$ ]]; then
      pkg=${BASH_REMATCH[1]}
    elif [[ -n $pkg && $line =~ ^[[:space:]]+Candidate:[[:space:]]*(.*)$ ]]; then
      [[ ${BASH_REMATCH[1]} == "(none)" ]] || cand[$pkg]=1
      pkg=""
    fi
  done < <(apt-cache policy "$@" 2>/dev/null)
  for p in "$@"; do [[ -n ${cand[$p]:-} ]] || printf '%s\n' "$p"; done
}

# ---------------------------------------------------------------------------

check_packages() {
  local -a build runtime local_pkgs
  local p
  mapfile -t build < <(stage_packages build)
  mapfile -t runtime < <(stage_packages runtime)
  mapfile -t local_pkgs < <(read_packages_txt)
  (( ${#build[@]} > 0 )) || fail "found no apt-get install package in the Dockerfile's build stage"
  (( ${#runtime[@]} > 0 )) || fail "found no apt-get install package in the Dockerfile's runtime stage"
  echo "build stage packages:   ${build[*]}"
  echo "runtime stage packages: ${runtime[*]}"
  local -A in_txt=()
  for p in "${local_pkgs[@]}"; do in_txt[$p]=1; done
  for p in "${build[@]}"; do
    if [[ -n ${in_txt[$p]:-} ]]; then
      ok "build package $p is in deploy/local/packages.txt"
    else
      fail "build package $p is not in deploy/local/packages.txt: the local build does not prove it suffices (add it there)"
    fi
  done
  local -a nocand=()
  mapfile -t nocand < <(missing_candidates "${build[@]}" "${runtime[@]}")
  for p in "${nocand[@]}"; do
    fail "package $p has no apt candidate on this Debian (apt-cache policy): misspelt, or run apt-get update"
  done
  (( ${#nocand[@]} > 0 )) || ok "every package of both stages has an apt candidate"
}

# so_variants PATH: the spellings under which dpkg may know a shared library. On merged-/usr
# systems dpkg knows a file under either /lib or /usr/lib, so try both, for the path and its target.
so_variants() {
  local p=$1 real c
  real=$(realpath -e -- "$p" 2>/dev/null) || real=$p
  for c in "$p" "$real"; do
    printf '%s\n' "$c" "${c/#\/usr\/lib\///lib/}" "${c/#\/lib\///usr/lib/}" \
      "${c/#\/usr\/lib64\///lib64/}" "${c/#\/lib64\///usr/lib64/}"
  done | awk '!seen[$0]++'
}

# owner_map PATH...: fills OWNER[path]=package for every spelling of every PATH that dpkg knows,
# with one dpkg -S call (dpkg reads its database once; one call per file would take half a minute).
declare -A OWNER=()
owner_map() {
  local -a all=()
  local p line pkgs path
  for p in "$@"; do mapfile -t -O "${#all[@]}" all < <(so_variants "$p"); done
  while IFS= read -r line; do
    [[ $line == diversion* || $line != *": /"* ]] && continue
    pkgs=${line%%: /*}
    path=/${line#*: /}
    pkgs=${pkgs%%,*}
    OWNER[$path]=${pkgs%%:*}
  done < <(dpkg -S "${all[@]}" 2>/dev/null || true)
}

# so_package PATH: the package that owns a shared library (after owner_map).
so_package() {
  local v
  while read -r v; do
    if [[ -n ${OWNER[$v]:-} ]]; then printf '%s\n' "${OWNER[$v]}"; return 0; fi
  done < <(so_variants "$1")
  return 1
}

check_libs() {
  local -a runtime
  local arg name bin line so pkg checked=0
  mapfile -t runtime < <(stage_packages runtime)
  (( ${#runtime[@]} > 0 )) || { fail "found no apt-get install package in the runtime stage"; return; }
  while read -r pkg; do
    fail "runtime package $pkg has no apt candidate (misspelt, or run apt-get update)"
  done < <(missing_candidates "${runtime[@]}")
  local -A provided=() direct=()
  for pkg in "${runtime[@]}"; do direct[$pkg]=1; done
  while read -r line; do
    [[ -n $line ]] && provided[${line//[<>]/}]=1
  done < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
             --no-replaces --no-enhances "${runtime[@]}" 2>/dev/null | grep -v '^[[:space:]]')
  echo "runtime stage: ${runtime[*]} (${#provided[@]} packages with dependencies)"
  for arg in "$@"; do
    name=${arg%%=*}
    bin=${arg#*=}
    if [[ -z $bin || ! -x $bin ]]; then
      fail "$name: ${bin:-(no path)} is not built: ctest builds every program first"
      continue
    fi
    checked=$((checked + 1))
    local -A seen=()
    local n=0 bad=0 ldd_out
    ldd_out=$(ldd "$bin" 2>&1) || { fail "$name: ldd $bin failed: $ldd_out"; continue; }
    local -a sos=()
    mapfile -t sos < <(sed -n -e 's/^.* => \(\/[^ ]*\) (.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (.*$/\1/p' <<<"$ldd_out")
    owner_map "${sos[@]}"
    while read -r line; do
      case $line in
        *"not found"*) fail "$name: ldd: $line"; bad=1; continue ;;
        *linux-vdso*|*linux-gate*) continue ;;
        *" => "*) so=${line#* => }; so=${so%% (*} ;;
        /*) so=${line%% (*} ;;
        *) continue ;;
      esac
      n=$((n + 1))
      if ! pkg=$(so_package "$so"); then
        fail "$name: no Debian package owns $so (dpkg -S): cannot say which runtime package provides it"
        bad=1
        continue
      fi
      if [[ -z ${provided[$pkg]:-} ]]; then
        fail "$name: $so is in package $pkg, which the runtime stage does not install (add $pkg, or a package that depends on it)"
        bad=1
      fi
      seen[$pkg]=1
    done <<<"$ldd_out"
    if (( bad == 0 )); then
      local -a via_direct=()
      for pkg in "${!seen[@]}"; do [[ -n ${direct[$pkg]:-} ]] && via_direct+=("$pkg"); done
      ok "$name: all $n libraries from ldd come from ${#seen[@]} packages provided by the runtime stage (directly: $(printf '%s\n' "${via_direct[@]}" | sort | tr '\n' ' '))"
    fi
  done
  (( checked > 0 )) || fail "no binary to check: build the tree first"
  # A runtime package that no checked binary needs directly is worth a note, not a failure (it may be
  # for a binary that is not built here).
}

# The build stage's output paths: every word of its RUN commands that starts with /build/.
stage_build_paths() { stage_instr build RUN | tr -s '[:blank:]' '\n' | grep '^/build/' || true; }

BUILD_TMP=""
cleanup_build_tmp() { [[ -z $BUILD_TMP ]] || rm -rf "$BUILD_TMP"; }

check_build() {
  local -a sources=() targets=() present=() defs=() outs=()
  local line w src t out found
  (( $# == 0 )) || die "build: unknown argument $1"
  while read -r line; do
    [[ $line == *--from=* ]] && continue
    [[ $line == \[* ]] && { fail "COPY in JSON form is not understood by this check: $line"; continue; }
    local -a words=() args=()
    read -r -a words <<<"$line"
    for w in "${words[@]}"; do [[ $w == --* ]] || args+=("$w"); done
    (( ${#args[@]} >= 2 )) || { fail "COPY without source and destination: $line"; continue; }
    sources+=("${args[@]:0:${#args[@]}-1}")
  done < <(stage_instr build COPY)
  mapfile -t targets < <(stage_after build --target)
  mapfile -t defs < <(stage_configure_defs)
  mapfile -t outs < <(stage_build_paths)
  echo "build stage COPY sources: ${sources[*]}"
  echo "build stage configure:    cmake -S . -B /build -G Ninja ${defs[*]}"
  echo "build stage targets:      ${targets[*]}"
  (( ${#sources[@]} > 0 )) || { fail "found no COPY in the build stage"; return 0; }
  (( ${#targets[@]} > 0 )) || { fail "found no 'cmake --build ... --target' in the build stage"; return 0; }
  present=("${targets[@]}")

  BUILD_TMP=$(mktemp -d "${TMPDIR:-/tmp}/shopmicro-dockerfile.XXXXXX")
  trap cleanup_build_tmp EXIT
  mkdir -p "$BUILD_TMP/src"
  for src in "${sources[@]}"; do
    src=${src#./}
    if [[ ! -e $ROOT/$src ]]; then
      fail "COPY source $src does not exist in $ROOT: docker build would fail"
      continue
    fi
    mkdir -p "$BUILD_TMP/src/$(dirname "$src")"
    cp -a "$ROOT/$src" "$BUILD_TMP/src/$src"
  done
  (( FAILS == 0 )) || return 0
  if ! cmake -S "$BUILD_TMP/src" -B "$BUILD_TMP/build" -G Ninja "${defs[@]}" >"$BUILD_TMP/configure.log" 2>&1; then
    grep -v '^-- ' "$BUILD_TMP/configure.log" | tail -n 30 | sed 's/^/    /'
    fail "cmake configure of the COPY sources alone failed: the build stage's COPY list misses something (or the tree does not configure)"
    return 0
  fi
  ok "cmake configure of the COPY sources alone (${defs[*]})"
  (( ${#present[@]} > 0 )) || { fail "no target to build"; return 0; }
  if ! cmake --build "$BUILD_TMP/build" --target "${present[@]}" >"$BUILD_TMP/build.log" 2>&1; then
    grep -E 'error|Error|FAILED' "$BUILD_TMP/build.log" | head -n 30 | sed 's/^/    /'
    fail "cmake --build --target ${present[*]} of the COPY sources alone failed"
    return 0
  fi
  ok "cmake --build --target ${present[*]} of the COPY sources alone"
  # Every /build/... path that the Dockerfile installs must be what the build made.
  for t in "${present[@]}"; do
    found=""
    for out in "${outs[@]}"; do
      [[ ${out##*/} == "$t" ]] && found=$out
    done
    if [[ -z $found ]]; then
      fail "target $t: no /build/.../$t path in the build stage installs it"
    elif [[ -x $BUILD_TMP/build/${found#/build/} ]]; then
      ok "target $t: $found exists after the build"
    else
      fail "target $t: the Dockerfile installs $found, but the build made no such file"
    fi
  done
}

# image_programs NAME=BINARY...: the arguments, then NAME=PATH for every other program the build
# stage installs from /build/, in the same build tree: the tree is where a given BINARY's /build/
# path puts it (/build/gateway/gateway and build/gateway/gateway -> build/). A program that cannot
# be placed so is printed with an empty path (check_libs fails it: "is not built").
image_programs() {
  local arg bin tree="" p
  local -A named=()
  local -a paths=()
  mapfile -t paths < <(stage_build_paths)
  for arg in "$@"; do
    printf '%s\n' "$arg"
    bin=${arg#*=}
    named[${bin##*/}]=1
    for p in "${paths[@]}"; do
      [[ -z $tree && $bin == */"${p#/build/}" ]] && tree=${bin%/"${p#/build/}"}
    done
  done
  for p in "${paths[@]}"; do
    [[ -n ${named[${p##*/}]:-} ]] && continue
    named[${p##*/}]=1
    printf '%s=%s\n' "${p##*/}" "${tree:+$tree/${p#/build/}}"
  done
}

# ---------------------------------------------------------------------------

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
  packages) check_packages ;;
  libs)     mapfile -t lib_bins < <(image_programs "$@"); check_libs "${lib_bins[@]}" ;;
  build)    check_build "$@" ;;
  *)        die "usage: $0 [--root DIR] packages | libs NAME=BINARY... | build" ;;
esac
if (( FAILS > 0 )); then
  printf '%d check(s) FAILED\n' "$FAILS"
  exit 1
fi
echo "all checks passed"
