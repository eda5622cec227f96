# shellcheck shell=bash
# deploy/local/shop.sh: `stack.sh shop`, shoppers for the running local stack: Locust (PyPI,
# pinned in tools/shopper/requirements.txt, installed once into $SHOPMICRO_SHOP_VENV, default
# <run folder>/venv-shopper/, by tests/tools/pyvenv.sh) runs tools/shopper/locustfile.py headless
# against this stack's gateway (127.0.0.1:$SHOPMICRO_GATEWAY_PORT): browse, order with an
# Idempotency-Key, replay it, read the order, at about --rate requests a second, printing Locust's
# statistics every 2 s until --duration has passed or Ctrl-C (or SIGTERM) stops it; Locust
# is exec'd, so the signal reaches it and it prints its final statistics. The shoppers (as many as
# the rate needs with about 3 s between one's actions, or --users; the locustfile says how) are
# customers shopper-1..K (orders:write orders:read; K: one per request/s, 5 to 100), with tokens of
# the local issuer (auth.sh's `token`) given to Locust in its environment (SHOPPER_TOKENS), never on
# its command line; a short-lived catalog:write token (SHOPPER_ADMIN_TOKEN) lets it create products
# when the catalog has fewer than 12 in stock. The statistics of the last run stay in
# <run folder>/shop/: stats.json (the final figures, written by the locustfile: totals with p50 and
# p95, every request name, every failure's reason) and Locust's own CSV files (stats_stats.csv,
# stats_failures.csv, stats_exceptions.csv; written every second, so they may miss the last one).
# Sourced by stack.sh; uses lib/common.sh and auth.sh.

SHOP_LOCUSTFILE="$ROOT/tools/shopper/locustfile.py"
SHOP_REQUIREMENTS="$ROOT/tools/shopper/requirements.txt"
# Customers (tokens): one per request/s of the rate, at least 5, at most 100; the shoppers share
# them round robin, far below the gateway's per-subject rate limits.
SHOP_MIN_CUSTOMERS=5
SHOP_MAX_CUSTOMERS=100

shop_usage() {
  printf 'usage: %s shop [--rate REQUESTS_PER_S] [--duration SECONDS] [--users N]\n' "$(rel "$SELF")" >&2
  exit 2
}

# cmd_shop [--rate R] [--duration S] [--users N]
cmd_shop() {
  local rate=2 duration="" users="" out="$RUN/shop" venv n customers ttl tokens="" tok admin until
  local -a run_time=()
  while (( $# > 0 )); do
    case $1 in
      --rate|--duration|--users) (( $# >= 2 )) || shop_usage ;;&
      --rate)     rate=$2; shift 2 ;;
      --duration) duration=$2; shift 2 ;;
      --users)    users=$2; shift 2 ;;
      -h|--help)  shop_usage ;;
      *) printf 'stack: shop: unknown argument: %s\n' "$1" >&2; shop_usage ;;
    esac
  done
  [[ $rate =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v r="$rate" 'BEGIN { exit !(r > 0 && r <= 10000) }' ||
    { printf 'stack: shop: --rate %s: requests per second, above 0 and at most 10000\n' "$rate" >&2; exit 2; }
  if [[ -n $duration ]]; then
    [[ $duration =~ ^[1-9][0-9]{0,6}$ ]] ||
      { printf 'stack: shop: --duration %s: a number of seconds, 1 or more\n' "$duration" >&2; exit 2; }
    run_time=(--run-time "${duration}s")
  fi
  local -a user_args=()
  if [[ -n $users ]]; then
    [[ $users =~ ^[1-9][0-9]{0,4}$ ]] ||
      { printf 'stack: shop: --users %s: a number of shoppers, 1 or more\n' "$users" >&2; exit 2; }
    user_args=(--users "$users" --spawn-rate "$users")
  fi
  is_port "$SHOPMICRO_GATEWAY_PORT" || die "shop: SHOPMICRO_GATEWAY_PORT='$SHOPMICRO_GATEWAY_PORT' is not a port"
  port_open "$SHOPMICRO_GATEWAY_PORT" ||
    die "shop: no gateway on 127.0.0.1:$SHOPMICRO_GATEWAY_PORT: start the stack first ($(rel "$SELF") up)"

  # Tokens that outlive the run (a day when it has no end), one customer per shopper.
  ttl=$(( ${duration:-86100} + 300 ))
  customers=$(awk -v r="$rate" -v lo="$SHOP_MIN_CUSTOMERS" -v hi="$SHOP_MAX_CUSTOMERS" \
    'BEGIN { n = int(r); if (n < r) n++; print (n < lo ? lo : n > hi ? hi : n) }')
  for (( n = 1; n <= customers; n++ )); do
    tok=$(cmd_token --sub "shopper-$n" --scope "orders:write orders:read" --ttl "$ttl") ||
      die "shop: cannot sign a token for shopper-$n"
    tokens+="$tok "
  done
  admin=$(cmd_token --sub shopper-admin --scope catalog:write --ttl 300) ||
    die "shop: cannot sign the catalog:write token"

  until=${duration:+for $duration s}
  until=${until:-until Ctrl-C}
  venv=$(abs_path "${SHOPMICRO_SHOP_VENV:-$RUN/venv-shopper}")
  mkdir -p "$out"
  say "shop: ~$rate requests/s${users:+ from $users shoppers}, customers shopper-1..$customers, against http://127.0.0.1:$SHOPMICRO_GATEWAY_PORT $until; statistics in $(rel "$out")/"
  # exec: Ctrl-C and SIGTERM go to Locust itself, which stops the shoppers and prints its summary.
  rm -f "$out/stats.json"
  SHOPPER_TOKENS=$tokens SHOPPER_ADMIN_TOKEN=$admin SHOPPER_RATE=$rate SHOPPER_STATS_FILE="$out/stats.json" \
    exec "$ROOT/tests/tools/pyvenv.sh" -r "$SHOP_REQUIREMENTS" "$venv" locust \
    -f "$SHOP_LOCUSTFILE" --headless ${user_args[@]+"${user_args[@]}"} ${run_time[@]+"${run_time[@]}"} \
    --host "http://127.0.0.1:$SHOPMICRO_GATEWAY_PORT" --stop-timeout 5 \
    --csv "$out/stats"
}
