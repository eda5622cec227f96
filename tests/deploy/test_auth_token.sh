#!/usr/bin/env bash
# tests/deploy/test_auth_token.sh: the local stack's signing key and `stack.sh token` (ctest
# deploy_auth_token, issue 36).
#
# In a temporary run folder (SHOPMICRO_RUN_DIR; a real .run/ is never touched) and with the build
# tree ctest names (SHOPMICRO_BUILD_DIR, for build/gateway/shopmicro-jwt), it checks that:
#   - `token` before any key exists fails, says how to make one, and prints nothing on stdout;
#   - `auth-keys` (what `up` runs) creates auth/signing-key.pem (mode 0600) and auth/jwks.json,
#     and a second run keeps both byte for byte;
#   - `token` prints one line, a token that the gateway's verifier (`shopmicro-jwt verify`, the
#     gateway's own code) accepts against that JWKS with the stack's issuer and audience (read from
#     stack.sh, where they are defined once): sub c1, scopes "orders:write orders:read", exp about
#     an hour ahead; `--sub`, `--scope` and `--ttl` change those;
#   - the same claims signed by another key, or checked with another audience, are refused;
#   - bad arguments (--ttl abc, an unknown option, a missing value) fail with status 2 and nothing
#     on stdout.
# No server is started. About a second. Exit status: 0 pass, 1 fail.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
STACK="$ROOT/deploy/local/stack.sh"
BUILD=${SHOPMICRO_BUILD_DIR:-$ROOT/build}
TOOL="$BUILD/gateway/shopmicro-jwt"

FAILS=0
fail() { printf 'FAIL: %s\n' "$*"; FAILS=$((FAILS + 1)); }
ok()   { printf 'ok:   %s\n' "$*"; }
# expect WHAT WANT GOT
expect() { if [[ $3 == "$2" ]]; then ok "$1"; else fail "$1: want '$2', got '$3'"; fi; }

[[ -x $TOOL ]] || { echo "FAIL: $TOOL is not built"; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/shopmicro-auth-token.XXXXXX")
trap 'rm -rf -- "$WORK"' EXIT
export SHOPMICRO_RUN_DIR="$WORK/run" SHOPMICRO_BUILD_DIR="$BUILD"
KEY="$WORK/run/auth/signing-key.pem"
JWKS="$WORK/run/auth/jwks.json"

# The stack's issuer and audience, from the one place they are defined.
# shellcheck source=SCRIPTDIR/../../deploy/local/stack.sh
read -r ISS AUD < <(source "$STACK"; printf '%s %s\n' "$AUTH_ISSUER" "$AUTH_AUDIENCE")
expect "issuer defined in stack.sh" shopmicro-local "$ISS"
expect "audience defined in stack.sh" shopmicro-gateway "$AUD"

# 1. No key yet.
rc=0
out=$("$STACK" token 2>"$WORK/err") || rc=$?
if (( rc != 0 )) && [[ -z $out ]] && grep -q 'auth-keys' "$WORK/err"; then
  ok "token without a key fails and names auth-keys"
else
  fail "token without a key: status $rc, stdout '$out', stderr: $(cat "$WORK/err")"
fi

# 2. auth-keys, twice.
if "$STACK" auth-keys >"$WORK/out" 2>&1 && [[ -f $KEY && -f $JWKS ]]; then
  ok "auth-keys creates the key and the JWKS"
else
  fail "auth-keys: $(cat "$WORK/out")"
fi
expect "signing key mode" 600 "$(stat -c %a "$KEY" 2>/dev/null || echo none)"
sum1=$(cat "$KEY" "$JWKS" 2>/dev/null | sha256sum)
"$STACK" auth-keys >"$WORK/out" 2>&1 || fail "second auth-keys: $(cat "$WORK/out")"
expect "second auth-keys keeps both files" "$sum1" "$(cat "$KEY" "$JWKS" 2>/dev/null | sha256sum)"

# 3. The default token.
tok=$("$STACK" token 2>"$WORK/err") || fail "token: $(cat "$WORK/err")"
expect "token prints one line" 1 "$(printf '%s\n' "$tok" | wc -l)"
now=$(date +%s)
got=$(printf '%s\n' "$tok" | "$TOOL" verify --jwks "$JWKS" --iss "$ISS" --aud "$AUD" 2>&1) || true
expect "default token verifies: sub and scopes" 'sub=c1 scopes="orders:write orders:read"' "${got% exp=*}"
exp=${got##*exp=}
if [[ $exp =~ ^[0-9]+$ ]] && (( exp >= now + 3590 && exp <= now + 3610 )); then
  ok "default ttl: exp about an hour ahead"
else
  fail "default ttl: exp '$exp', now $now"
fi

# 4. --sub, --scope, --ttl.
tok=$("$STACK" token --sub admin-7 --scope "catalog:write" --ttl 120 2>"$WORK/err") ||
  fail "token with options: $(cat "$WORK/err")"
got=$("$TOOL" verify --jwks "$JWKS" --iss "$ISS" --aud "$AUD" --token "$tok" 2>&1) || true
expect "token --sub --scope: sub and scopes" 'sub=admin-7 scopes="catalog:write"' "${got% exp=*}"
exp=${got##*exp=}
if [[ $exp =~ ^[0-9]+$ ]] && (( exp >= now + 110 && exp <= now + 130 )); then
  ok "token --ttl 120"
else
  fail "token --ttl 120: exp '$exp', now $now"
fi

# 5. Refusals: another key; another audience.
"$TOOL" keygen --key "$WORK/other.pem" --jwks "$WORK/other.json" >/dev/null
other=$("$TOOL" sign --key "$WORK/other.pem" --kid "$(sed 's/.*"kid":"\([^"]*\)".*/\1/' "$JWKS")" \
  --iss "$ISS" --aud "$AUD" --sub c1 --scope "orders:read" --ttl 60)
if "$TOOL" verify --jwks "$JWKS" --iss "$ISS" --aud "$AUD" --token "$other" >"$WORK/out" 2>&1; then
  fail "a token of another key under the stack's kid verified: $(cat "$WORK/out")"
else
  expect "another key's token refused" "shopmicro-jwt: invalid token: bad signature" "$(cat "$WORK/out")"
fi
if "$TOOL" verify --jwks "$JWKS" --iss "$ISS" --aud other-api --token "$tok" >"$WORK/out" 2>&1; then
  fail "the stack's token verified for another audience"
else
  expect "another audience refused" "shopmicro-jwt: invalid token: wrong audience" "$(cat "$WORK/out")"
fi

# 6. Bad arguments.
for args in "--ttl abc" "--ttl 0" "--bogus" "--sub"; do
  rc=0
  # shellcheck disable=SC2086  # the words of args are the arguments
  out=$("$STACK" token $args 2>"$WORK/err") || rc=$?
  if (( rc == 2 )) && [[ -z $out ]]; then
    ok "token $args: status 2, nothing on stdout"
  else
    fail "token $args: status $rc, stdout '$out', stderr: $(cat "$WORK/err")"
  fi
done

if (( FAILS > 0 )); then echo "$FAILS check(s) failed"; exit 1; fi
echo "all checks passed"
