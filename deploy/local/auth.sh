# shellcheck shell=bash
# deploy/local/auth.sh: the local stack's token issuer (issue 36): one signing key and its public
# JWKS in the run folder, made once, and `token`, which signs a bearer token for the gateway with
# the build tree's shopmicro-jwt (gateway/tools/jwt_tool.c). Sourced by stack.sh (not a script of
# its own); uses lib/common.sh. `up` calls auth_keys_ensure after the build, and so does starting
# the gateway (its SERVICES line names @AUTH_JWKS@, services.sh).
#
# The issuer and audience of the local stack's tokens, defined here once: `token` signs them and
# the gateway's SERVICES line gives them to it (GATEWAY_JWT_ISSUER, GATEWAY_JWT_AUDIENCE). A real
# deployment takes both from its identity provider instead. The default token is a customer's
# (c1: place and read its own orders); --scope catalog:write makes a catalog admin's.
AUTH_ISSUER=shopmicro-local
AUTH_AUDIENCE=shopmicro-gateway
AUTH_DEFAULT_SUB=c1
AUTH_DEFAULT_SCOPE="orders:write orders:read"
AUTH_DEFAULT_TTL=3600

# auth_paths: AUTH_DIR, AUTH_KEY, AUTH_JWKS of the current run folder, and JWT_TOOL of the build
# tree (functions, not variables set once: `test` moves the run folder).
auth_paths() {
  AUTH_DIR="$RUN/auth"
  AUTH_KEY="$AUTH_DIR/signing-key.pem"
  AUTH_JWKS="$AUTH_DIR/jwks.json"
  JWT_TOOL="$BUILD_DIR/gateway/shopmicro-jwt"
}

auth_need_tool() {
  [[ -x $JWT_TOOL ]] ||
    die "auth: $(rel "$JWT_TOOL") is not built: run $(rel "$SELF") build (or up) first"
}

# auth_keys_ensure: the signing key and its JWKS, created when neither exists; kept as they are
# otherwise (a new key would invalidate every token handed out). One without the other is an
# error: which of them is right cannot be told.
auth_keys_ensure() {
  local kid
  auth_paths
  if [[ -f $AUTH_KEY && -f $AUTH_JWKS ]]; then
    say "auth: keeping the signing key $(rel "$AUTH_KEY") and $(rel "$AUTH_JWKS")"
    return 0
  fi
  if [[ -e $AUTH_KEY || -e $AUTH_JWKS ]]; then
    die "auth: only one of $(rel "$AUTH_KEY") and $(rel "$AUTH_JWKS") exists: remove $(rel "$AUTH_DIR") to make a new pair"
  fi
  auth_need_tool
  mkdir -p -m 700 "$AUTH_DIR"
  kid=$("$JWT_TOOL" keygen --key "$AUTH_KEY" --jwks "$AUTH_JWKS") ||
    die "auth: shopmicro-jwt keygen failed"
  say "auth: new signing key $(rel "$AUTH_KEY") (ES256, ${kid}), public JWKS $(rel "$AUTH_JWKS")"
}

cmd_auth_keys() { auth_keys_ensure; }

auth_token_usage() {
  printf 'usage: %s token [--sub ID] [--scope "SCOPE ..."] [--ttl SECONDS]\n' "$(rel "$SELF")" >&2
  exit 2
}

# token [--sub ID] [--scope "..."] [--ttl SECONDS]: a signed token on stdout (and nothing else).
cmd_token() {
  local sub=$AUTH_DEFAULT_SUB scope=$AUTH_DEFAULT_SCOPE ttl=$AUTH_DEFAULT_TTL
  while (( $# > 0 )); do
    case $1 in
      --sub|--scope|--ttl) (( $# >= 2 )) || auth_token_usage ;;&
      --sub)   sub=$2; shift 2 ;;
      --scope) scope=$2; shift 2 ;;
      --ttl)   ttl=$2; shift 2 ;;
      -h|--help) auth_token_usage ;;
      *) printf 'stack: token: unknown argument: %s\n' "$1" >&2; auth_token_usage ;;
    esac
  done
  if [[ ! $ttl =~ ^[1-9][0-9]{0,7}$ ]]; then
    printf 'stack: token: --ttl %s: a number of seconds, 1 or more\n' "$ttl" >&2
    exit 2
  fi
  auth_paths
  [[ -f $AUTH_KEY ]] ||
    die "auth: no signing key $(rel "$AUTH_KEY"): run $(rel "$SELF") up (or auth-keys) first"
  auth_need_tool
  "$JWT_TOOL" sign --key "$AUTH_KEY" --iss "$AUTH_ISSUER" --aud "$AUTH_AUDIENCE" --sub "$sub" \
    --scope "$scope" --ttl "$ttl"
}
