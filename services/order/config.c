/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - every setting of the order service, in one table. */
#include "config.h"

#define OFF(f) SVC_CFG_OFF(ord_config_t, f)

static const svc_cfg_entry_t table[] = {
    {"ORDER_LISTEN", SVC_CFG_STR, 1, 255, "127.0.0.1:25052", OFF(listen),
     "gRPC listen address host:port"},
    {"ORDER_DB_DSN", SVC_CFG_STR, 1, 511, "host=127.0.0.1 port=25432 dbname=orders user=postgres",
     OFF(db_dsn), "libpq connection string of the orders database"},
    /* 8 on 2 cores: a CreateOrder holds its worker through two waits (the
     * pricing call, the commit), so 4 left orders queued while cores idled
     * (docs/benchmarks.md, "ORDER_WORKERS at 16 connections"). */
    {"ORDER_WORKERS", SVC_CFG_INT, 1, 256, "8", OFF(workers),
     "worker threads (each has one database connection)"},
    {"ORDER_LOG_LEVEL", SVC_CFG_LOG_LEVEL, 0, 0, "info", OFF(log_level),
     "debug | info | warn | error"},
    SVC_MEM_CFG_ENTRIES("ORDER", ord_config_t, mem),
    {"ORDER_DRAIN_MS", SVC_CFG_INT, 0, 600000, "10000", OFF(drain_ms),
     "on SIGTERM, how long in-flight calls may take before they are cancelled"},
    {"ORDER_DB_STATEMENT_TIMEOUT_MS", SVC_CFG_INT, 10, 600000, "5000", OFF(db_statement_timeout_ms),
     "server-side limit of one SQL statement"},
    {"ORDER_DB_STARTUP_WAIT_MS", SVC_CFG_INT, 0, 600000, "15000", OFF(db_startup_wait_ms),
     "how long start-up waits for the database to accept connections"},
    {"ORDER_CATALOG_ADDR", SVC_CFG_STR, 1, 255, "127.0.0.1:25051", OFF(catalog_addr),
     "the catalog's gRPC address host:port (live prices)"},
    {"ORDER_CATALOG_ATTEMPT_TIMEOUT_MS", SVC_CFG_INT, 1, 600000, "3000",
     OFF(catalog_attempt_timeout_ms),
     "deadline of one GetProduct attempt (the caller's earlier deadline wins)"},
    {"ORDER_CATALOG_MAX_ATTEMPTS", SVC_CFG_INT, 1, 10, "3", OFF(catalog_max_attempts),
     "GetProduct attempts per price, the first included (1 = never retry)"},
    {"ORDER_CATALOG_BACKOFF_BASE_MS", SVC_CFG_INT, 1, 60000, "100", OFF(catalog_backoff_base_ms),
     "retry backoff window before the first retry (doubles per retry, full jitter)"},
    {"ORDER_CATALOG_BACKOFF_CAP_MS", SVC_CFG_INT, 1, 600000, "2000", OFF(catalog_backoff_cap_ms),
     "largest retry backoff window (>= ORDER_CATALOG_BACKOFF_BASE_MS)"},
    {"ORDER_CATALOG_BREAKER_FAILURES", SVC_CFG_INT, 0, 100000, "5", OFF(catalog_breaker_failures),
     "consecutive failed GetProduct calls that open the breaker (0 = never open)"},
    {"ORDER_CATALOG_BREAKER_COOLDOWN_MS", SVC_CFG_INT, 1, 3600000, "10000",
     OFF(catalog_breaker_cooldown_ms), "how long the breaker stays open before one trial call"},
    {"ORDER_CATALOG_MAX_CONCURRENT", SVC_CFG_INT, 0, 100000, "0", OFF(catalog_max_concurrent),
     "bulkhead: GetProduct calls in flight at once (0 = unlimited)"},
    {"ORDER_IDEMPOTENCY_TTL_S", SVC_CFG_INT, 86400, 31536000, "172800", OFF(idempotency_ttl_s),
     "idempotency keys older than this are deleted (at least 24 h)"},
    {"ORDER_IDEMPOTENCY_CLEANUP_EVERY", SVC_CFG_INT, 1, 1000000, "100",
     OFF(idempotency_cleanup_every),
     "each worker deletes expired keys (at most 1000) every this many CreateOrder calls"},
    KFK_WORKER_CFG_ROWS("ORDER", ord_config_t, saga, "order",
                        "the saga (StockReserved/StockRejected in; orders stay PENDING without)"),
    {"ORDER_ADMIN_LISTEN", SVC_CFG_STR, 1, 255, "127.0.0.1:9467", OFF(admin_listen),
     "admin HTTP host:port (/metrics /healthz /readyz of the saga's consumer); none: no port"},
};

svc_err_t ord_config_load(ord_config_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    return svc_cfg_load(table, SVC_COUNTOF(table), c, NULL, errbuf);
}

void ord_config_help(FILE *f)
{
    fprintf(f, "Usage: order [--help]\n\n"
               "The ShopMicro order service: gRPC shopmicro.order.v1.OrderService on "
               "PostgreSQL,\npricing every item live from the catalog. Configured only by "
               "environment variables.\nSIGTERM or SIGINT drains in-flight calls and exits "
               "0.\n\n");
    svc_cfg_print_help(f, table, SVC_COUNTOF(table));
}

void ord_config_log(const ord_config_t *c)
{
    svc_cfg_log("order", table, SVC_COUNTOF(table), c);
}
