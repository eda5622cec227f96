#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# pyvenv.sh [-r REQUIREMENTS] VENV TOOL [ARGS...]: runs TOOL (a program of the venv's bin/, e.g.
# schemathesis or python) from the venv at VENV, made first when it is missing or was made from
# another REQUIREMENTS (default: tests/tools/requirements.txt, the test suite's tools; its SHA-256
# is kept in VENV/.requirements). Callers running at once (ctest -j) wait for each other on
# VENV.lock rather than install twice. Needs PyPI only when the venv is made.
set -eu
req="$(dirname "$0")/requirements.txt"
if [ "${1:-}" = "-r" ]; then
    req=$2
    shift 2
fi
venv=$1
tool=$2
shift 2
want=$(sha256sum "$req" | cut -d' ' -f1)

ensure() {
    [ "$(cat "$venv/.requirements" 2>/dev/null || true)" = "$want" ] && return 0
    echo "pyvenv: making $venv from $req (PyPI)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    echo "$want" >"$venv/.requirements"
}

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
ensure
flock -u 9
exec "$venv/bin/$tool" "$@"
