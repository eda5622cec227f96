#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# check_openapi.sh VENV DOC: validates the gateway's generated OpenAPI
# document (build/gateway/openapi.json) against the OpenAPI 3.1 schema with
# openapi-spec-validator from PyPI, in a venv made at VENV on first use and
# kept (the build tree's venv-openapi/; made again when the pin changes).
# The ctest openapi_spec_valid; exits non-zero naming what is wrong.
set -eu
venv=$1
doc=$2
pin="openapi-spec-validator==0.9.0"

if [ "$(cat "$venv/.pin" 2>/dev/null || true)" != "$pin" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$pin"
    echo "$pin" >"$venv/.pin"
fi
"$venv/bin/openapi-spec-validator" --schema 3.1 "$doc"
