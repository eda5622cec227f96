#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# gotool.sh [--path] DIR PACKAGE@VERSION [ARGS...]: runs the Go program PACKAGE (a main package,
# e.g. github.com/bufbuild/buf/cmd/buf) at VERSION with ARGS, from DIR/NAME-VERSION/NAME (NAME as
# `go install` names it: the package's last path element, or the one before a /vN suffix;
# VERSION without its leading v). The binary is built first when it is missing, with
# `go install` from the Go module proxy (GOPROXY, GOMODCACHE and GOCACHE as the Go toolchain has
# them); the toolchain is $GO, else `go` on PATH, else /usr/local/go/bin/go. With --path it
# prints the binary's path instead of running it. Callers running at once (ctest -j) wait for
# each other on DIR/NAME-VERSION.lock rather than build twice. Needs the proxy only for the build.
set -eu
print_path=0
if [ "${1:-}" = "--path" ]; then
    print_path=1
    shift
fi
if [ $# -lt 2 ]; then
    echo "usage: gotool.sh [--path] DIR PACKAGE@VERSION [ARGS...]" >&2
    exit 2
fi
dir=$1
spec=$2
shift 2
pkg=${spec%@*}
version=${spec##*@}
case $spec in
    *?@v[0-9]*) ;;
    *) echo "gotool: '$spec' is not PACKAGE@vX.Y.Z (a pinned version, never @latest)" >&2; exit 2 ;;
esac
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)  # go install wants an absolute GOBIN
name=${pkg##*/}
case $name in
    v[0-9]*) parent=${pkg%/*}; name=${parent##*/} ;;
esac
home="$dir/$name-${version#v}"
bin="$home/$name"

find_go() {
    for g in "${GO:-}" "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go; do
        if [ -n "$g" ] && [ -x "$g" ]; then
            echo "$g"
            return 0
        fi
    done
    return 1
}

ensure() {
    [ "$(cat "$home/.installed" 2>/dev/null || true)" = "$spec" ] && [ -x "$bin" ] && return 0
    if ! go=$(find_go); then
        echo "gotool: no Go toolchain to build $spec: set GO=/path/to/go, or put go on PATH" \
             "(looked for \$GO, go on PATH and /usr/local/go/bin/go)" >&2
        exit 1
    fi
    echo "gotool: building $spec into $home with $("$go" version) (Go module proxy)" >&2
    rm -rf "$home" "$home.tmp"
    mkdir -p "$home.tmp"
    start=$(date +%s)
    # GOTOOLCHAIN=local: a module that wants a newer Go fails here instead of fetching one.
    if ! GOBIN="$home.tmp" GOTOOLCHAIN=local "$go" install -trimpath "$spec"; then
        rm -rf "$home.tmp"
        echo "gotool: go install $spec failed (see above)" >&2
        exit 1
    fi
    if [ ! -x "$home.tmp/$name" ]; then
        echo "gotool: go install $spec made no $name in $home.tmp" >&2
        exit 1
    fi
    echo "$spec" >"$home.tmp/.installed"
    mv "$home.tmp" "$home"
    echo "gotool: built $bin in $(($(date +%s) - start)) s" >&2
}

exec 9>"$home.lock"
flock 9
ensure
flock -u 9
if [ "$print_path" = 1 ]; then
    echo "$bin"
    exit 0
fi
exec "$bin" "$@"
