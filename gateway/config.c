/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - every setting of the gateway, in one table. */
#include <unistd.h>

#include "config.h"
#include "cors.h"
#include "resilience.h"

#define OFF(f) SVC_CFG_OFF(gw_config_t, f)

static const svc_cfg_entry_t table[] = {
    {"GATEWAY_LISTEN", SVC_CFG_STR, 1, 255, "127.0.0.1:8080", OFF(listen),
     "HTTP listen address host:port (one SO_REUSEPORT listener per thread)"},
    /* The metrics, the detailed readiness and the live resilience page tell
     * whoever reads them the system's insides (upstream addresses, recent
     * failures): loopback only unless a deployment says otherwise.
     * 9469 follows the services' admin ports (relay 9464 ... notification
     * 9468, deploy/local/services.sh). */
    {"GATEWAY_ADMIN_LISTEN", SVC_CFG_STR, 1, 255, "127.0.0.1:9469", OFF(admin_listen),
     "admin listener host:port: /metrics, the detailed /readyz, /debug/resilience and its "
     "feed (\"none\" = no admin port)"},
    {"GATEWAY_THREADS", SVC_CFG_INT, 0, 256, "0", OFF(threads),
     "event-loop threads; 0 = one per online core"},
    {"GATEWAY_CATALOG_ADDR", SVC_CFG_STR, 1, 255, "127.0.0.1:25051", OFF(catalog_addr),
     "the catalog's gRPC address host:port"},
    {"GATEWAY_ORDER_ADDR", SVC_CFG_STR, 1, 255, "127.0.0.1:25052", OFF(order_addr),
     "the order service's gRPC address host:port"},
    {"GATEWAY_DEFAULT_TIMEOUT_MS", SVC_CFG_INT, 0, 3600000, "10000", OFF(default_timeout_ms),
     "deadline of a call whose request has no Grpc-Timeout header (0 = none)"},
    /* The API's largest request is an order: 100 lines are a few KB. 64 KiB
     * leaves room for that many times more, and keeps what one request can
     * make a loop buffer (and decode) small (docs/gateway.md, "Security"). */
    {"GATEWAY_MAX_BODY_BYTES", SVC_CFG_INT, 1, 67108864, "65536", OFF(max_body_bytes),
     "largest request body; a larger one gets 413 before it is read"},
    {"GATEWAY_MAX_METADATA_BYTES", SVC_CFG_INT, 1024, 7168, "4096", OFF(max_metadata_bytes),
     "most gRPC metadata a request may send upstream (name + value + 32 per entry); more is "
     "431 (gRPC's own limit is 8 KiB, its own headers included)"},
    /* Each connection costs a descriptor and memory (2,000 with a request
     * each took the RSS from 17 to 60 MB: docs/gateway.md, "Memory"); 4096
     * keeps a flood of them near 150 MB, and is four times what the load
     * test holds open. */
    {"GATEWAY_MAX_CONNECTIONS", SVC_CFG_INT, 1, 1000000, "4096", OFF(max_connections),
     "client connections open at once, all threads together; at the limit new ones wait in "
     "the listen backlog until one closes"},
    {"GATEWAY_IDLE_TIMEOUT_MS", SVC_CFG_INT, 100, 3600000, "10000", OFF(idle_timeout_ms),
     "how long a keep-alive connection may idle, or a request take to arrive"},
    {"GATEWAY_DRAIN_MS", SVC_CFG_INT, 0, 600000, "10000", OFF(drain_ms),
     "on SIGTERM, how long in-flight requests may take before they are cancelled"},
    SVC_MEM_CFG_ENTRIES("GATEWAY", gw_config_t, mem),
    {"GATEWAY_LOG_LEVEL", SVC_CFG_LOG_LEVEL, 0, 0, "info", OFF(log_level),
     "debug | info | warn | error"},
    {"GATEWAY_LOCK_DIR", SVC_CFG_STR, 0, 255, "/tmp", OFF(lock_dir),
     "directory of the per-address instance lock file (\"none\" = no lock file)"},
    {"GATEWAY_ATTEMPT_TIMEOUT_MS", SVC_CFG_INT, 1, 600000, "3000", OFF(attempt_timeout_ms),
     "deadline of one upstream attempt (the request's earlier deadline wins)"},
    {"GATEWAY_MAX_ATTEMPTS", SVC_CFG_INT, 1, 10, "3", OFF(max_attempts),
     "attempts per idempotent call, the first included (Create* are never retried)"},
    {"GATEWAY_BACKOFF_BASE_MS", SVC_CFG_INT, 1, 60000, "100", OFF(backoff_base_ms),
     "retry backoff window before the first retry (doubles per retry, full jitter)"},
    {"GATEWAY_BACKOFF_CAP_MS", SVC_CFG_INT, 1, 600000, "2000", OFF(backoff_cap_ms),
     "largest retry backoff window (>= GATEWAY_BACKOFF_BASE_MS)"},
    {"GATEWAY_BREAKER_FAILURES", SVC_CFG_INT, 0, 100000, "5", OFF(breaker_failures),
     "consecutive failed calls that open an upstream's breaker (0 = never open)"},
    {"GATEWAY_BREAKER_COOLDOWN_MS", SVC_CFG_INT, 1, 3600000, "10000", OFF(breaker_cooldown_ms),
     "how long a breaker stays open before one trial call"},
    {"GATEWAY_MAX_CONCURRENT", SVC_CFG_INT, 0, 1000000, "0", OFF(max_concurrent),
     "bulkhead: calls in flight per upstream (0 = unlimited); a full one answers 503"},
    /* Stale reads (docs/gateway.md): on by default because the catalog's
     * answers change rarely and the order service prices every order from
     * the catalog itself, so a stale product page can mislead a reader for
     * at most the bound, never an order. 30 s spans a catalog restart and a
     * breaker cooldown (10 s) with its trial; an outage longer than that
     * gets 503s again rather than ever older answers. */
    {"GATEWAY_STALE_READS", SVC_CFG_BOOL, 0, 0, "on", OFF(stale_reads),
     "answer the catalog's GETs with their last 200 (marked stale) while the catalog is "
     "unavailable (on | off)"},
    {"GATEWAY_STALE_MAX_AGE_MS", SVC_CFG_INT, 1, 86400000, "30000", OFF(stale_max_age_ms),
     "the oldest answer served stale; older ones are dropped"},
    {"GATEWAY_STALE_MAX_ENTRIES", SVC_CFG_INT, 1, 1000000, "4096", OFF(stale_max_entries),
     "answers kept for stale reads at most (when full, the one refreshed longest ago goes)"},
    {"GATEWAY_STALE_MAX_BYTES", SVC_CFG_INT, 65536, 1073741824, "8388608", OFF(stale_max_bytes),
     "memory for those answers at most (keys, bodies, 96 bytes each); one answer over an "
     "eighth of it is not kept"},
    /* Fail-fast windows (docs/gateway.md): an upstream that refuses a route
     * because its own dependency is out, and says for how long, is not asked
     * again for that route until then, at most the cap, which keeps one
     * probe a second going (failfast.h). */
    {"GATEWAY_FAILFAST", SVC_CFG_BOOL, 0, 0, "on", OFF(failfast),
     "answer a route 503 without calling while its upstream's refusal with a retry hint "
     "holds (on | off)"},
    {"GATEWAY_FAILFAST_MAX_WINDOW_MS", SVC_CFG_INT, 1, 600000, "1000", OFF(failfast_max_window_ms),
     "the longest such window, whatever the hint: after it one call probes the upstream"},
    /* Who may call (door.h, docs/gateway.md "Security"). No key set is
     * built in: without one only the public reads work, and a deployment
     * names its identity provider's (the local stack makes its own,
     * deploy/local/auth.sh). */
    {"GATEWAY_JWKS_FILE", SVC_CFG_STR, 0, 255, "", OFF(jwks_file),
     "JSON Web Key Set file of the token issuer's public keys (ES256, RS256), reloaded when "
     "it changes; empty = no token can be verified: every route that needs one answers 401"},
    {"GATEWAY_PUBLIC_READS", SVC_CFG_BOOL, 0, 0, "on", OFF(public_reads),
     "the catalog's reads need no token (on | off: every /v1 route needs a valid token)"},
    {"GATEWAY_JWT_ISSUER", SVC_CFG_STR, 0, 255, "", OFF(jwt_issuer),
     "the iss every token must carry (required with GATEWAY_JWKS_FILE)"},
    {"GATEWAY_JWT_AUDIENCE", SVC_CFG_STR, 1, 255, "shopmicro-gateway", OFF(jwt_audience),
     "the aud a token must name"},
    {"GATEWAY_JWT_LEEWAY_S", SVC_CFG_INT, 0, 600, "30", OFF(jwt_leeway_s),
     "clock skew allowed on exp and nbf, seconds"},
    {"GATEWAY_JWT_CACHE_ENTRIES", SVC_CFG_INT, 0, 1000000, "2048", OFF(jwt_cache_entries),
     "verified tokens each loop thread remembers until they expire (0 = verify every request)"},
    /* Rate limits (ratelimit.h): per token subject, or per client address
     * for anonymous reads. A reader's page load is a few requests, so 100/s
     * with bursts of 200 stops a scraper, not a person; writes cost a
     * database transaction each and get a fifth of that. */
    {"GATEWAY_RATE_LIMITS", SVC_CFG_STR, 1, 511, "read=100/s,burst=200;write=20/s,burst=40",
     OFF(rate_limits),
     "per-client request rates of the route classes (GET routes: read, POST routes: write): "
     "name=N/s|m|h[,burst=N];... or name=off, or off for no limits"},
    {"GATEWAY_RATE_LIMIT_CAPACITY", SVC_CFG_INT, 16, 16777216, "65536", OFF(rate_limit_capacity),
     "clients tracked at once (108 bytes each, allocated at start); when full the least "
     "recently seen full bucket is forgotten"},
    /* CORS (cors.h): no origin by default, so no page of another origin
     * may read an answer; a deployment names the origins of its web apps. */
    {"GATEWAY_CORS_ORIGINS", SVC_CFG_STR, 0, 511, "", OFF(cors_origins),
     "origins whose browser pages may call the API (CORS): scheme://host[:port],... "
     "(empty or none = no CORS headers at all)"},
    /* The live resilience page (docs/gateway.md): the default is the local
     * stack's order admin port (deploy/local, ORDER_ADMIN_LISTEN), where the
     * order service's own catalog breaker lives. */
    {"GATEWAY_RESILIENCE_PEERS", SVC_CFG_STR, 0, 511, "order=http://127.0.0.1:9467",
     OFF(resilience_peers),
     "admin ports whose /debug/resilience.json the page /debug/resilience shows beside the "
     "gateway's own upstreams: name=http://host:port,... as the browser reaches them "
     "(none = the gateway's only)"},
};

svc_err_t gw_config_load(gw_config_t *c, const char *(*getenv_fn)(const char *name),
                         char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = svc_cfg_load(table, SVC_COUNTOF(table), c, getenv_fn, errbuf);

    if (err != SVC_OK)
        return err;
    if (c->backoff_cap_ms < c->backoff_base_ms) {
        svc_errbuf_set(errbuf,
                       "GATEWAY_BACKOFF_CAP_MS (%lld) is below GATEWAY_BACKOFF_BASE_MS "
                       "(%lld)",
                       (long long)c->backoff_cap_ms, (long long)c->backoff_base_ms);
        return SVC_EINVAL;
    }
    err = gw_resilience_peers_check(c->resilience_peers, errbuf);
    if (err != SVC_OK)
        return err;
    err = gw_cors_check(c->cors_origins, errbuf);
    if (err != SVC_OK)
        return err;
    if (c->threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c->threads = n >= 1 ? (n > 256 ? 256 : n) : 1;
    }
    return SVC_OK;
}

void gw_config_help(FILE *f)
{
    fprintf(f, "Usage: gateway [--help]\n\n"
               "The ShopMicro REST gateway: grpc-gateway compatible JSON over HTTP/1.1 in front "
               "of the\ncatalog and order gRPC services. Configured only by environment "
               "variables. SIGTERM or\nSIGINT stops accepting, drains in-flight requests and "
               "exits 0.\n\n");
    svc_cfg_print_help(f, table, SVC_COUNTOF(table));
}

void gw_config_log(const gw_config_t *c)
{
    svc_cfg_log("gateway", table, SVC_COUNTOF(table), c);
}
