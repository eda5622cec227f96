#!/usr/bin/env bash
# deploy/compose/token.sh: a bearer token for the compose stack's gateway, on stdout (and nothing
# else), signed with the key that the one-shot auth-keys service made in the volume authkey.
#
#   deploy/compose/token.sh [--sub ID] [--scope "SCOPE ..."] [--ttl SECONDS]
#   curl -H "Authorization: Bearer $(deploy/compose/token.sh)" -XPOST localhost:8080/v1/products -d ...
#
# Defaults: --sub c1, --scope "catalog:write orders:write orders:read" (everything but reading other
# customers' orders, orders:admin), --ttl 3600; the issuer and audience are the ones
# docker-compose.yml gives the gateway (x-gateway-auth), read inside the container. It runs
#   $SHOPMICRO_COMPOSE run --rm --no-deps -T auth-keys '<shopmicro-jwt sign ...>'
# in a throwaway container of the same image with the same volumes. SHOPMICRO_COMPOSE is the
# compose command with its files and project (default: `docker compose -f <this folder>/docker-
# compose.yml`, or `docker-compose ...` where the v2 plugin is missing); test.sh sets it. The stack
# must have been started once (`up`), so that the key exists.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
usage() { sed -n '4,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
sub=c1 scope="catalog:write orders:write orders:read" ttl=3600
while (( $# > 0 )); do
  case $1 in
    --sub|--scope|--ttl) (( $# >= 2 )) || usage ;;&
    --sub)   sub=$2; shift 2 ;;
    --scope) scope=$2; shift 2 ;;
    --ttl)   ttl=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ $ttl =~ ^[1-9][0-9]{0,7}$ ]] || { echo "token.sh: --ttl $ttl: a number of seconds, 1 or more" >&2; exit 2; }

if [[ -n ${SHOPMICRO_COMPOSE:-} ]]; then
  read -r -a COMPOSE <<<"$SHOPMICRO_COMPOSE"
elif docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose -f "$HERE/docker-compose.yml")
else
  COMPOSE=(docker-compose -f "$HERE/docker-compose.yml")
fi

# The service's entrypoint is `sh -ec`: the first word after the service is the script, the next
# ones its $0, $1, ... (passed as arguments, never pasted into the script).
# shellcheck disable=SC2016  # expanded by the container's shell
script='[ -f "$AUTH_SIGNING_KEY" ] || { echo "token.sh: no signing key in the volume authkey yet: start the stack (up) first" >&2; exit 1; }
exec shopmicro-jwt sign --key "$AUTH_SIGNING_KEY" --iss "$GATEWAY_JWT_ISSUER" --aud "$GATEWAY_JWT_AUDIENCE" --sub "$1" --scope "$2" --ttl "$3"'
exec "${COMPOSE[@]}" run --rm --no-deps -T auth-keys "$script" token "$sub" "$scope" "$ttl"
