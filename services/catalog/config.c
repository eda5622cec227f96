/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - every setting of the catalog service, in one table. */
#include "config.h"

#define OFF(f) SVC_CFG_OFF(cat_config_t, f)

static const svc_cfg_entry_t table[] = {
    {"CATALOG_LISTEN", SVC_CFG_STR, 1, 255, "127.0.0.1:25051", OFF(listen),
     "gRPC listen address host:port"},
    {"CATALOG_DB_DSN", SVC_CFG_STR, 1, 511,
     "host=127.0.0.1 port=25432 dbname=catalog user=postgres", OFF(db_dsn),
     "libpq connection string of the catalog database"},
    {"CATALOG_WORKERS", SVC_CFG_INT, 1, 256, "4", OFF(workers),
     "worker threads (each has one database connection)"},
    {"CATALOG_LOG_LEVEL", SVC_CFG_LOG_LEVEL, 0, 0, "info", OFF(log_level),
     "debug | info | warn | error"},
    SVC_MEM_CFG_ENTRIES("CATALOG", cat_config_t, mem),
    {"CATALOG_DRAIN_MS", SVC_CFG_INT, 0, 600000, "10000", OFF(drain_ms),
     "on SIGTERM, how long in-flight calls may take before they are cancelled"},
    {"CATALOG_DB_STATEMENT_TIMEOUT_MS", SVC_CFG_INT, 10, 600000, "5000",
     OFF(db_statement_timeout_ms), "server-side limit of one SQL statement"},
    {"CATALOG_DB_STARTUP_WAIT_MS", SVC_CFG_INT, 0, 600000, "15000", OFF(db_startup_wait_ms),
     "how long start-up waits for the database to accept connections"},
    KFK_WORKER_CFG_ROWS("CATALOG", cat_config_t, saga, "catalog",
                        "the stock saga (OrderCreated in)"),
    {"CATALOG_ADMIN_LISTEN", SVC_CFG_STR, 1, 255, "127.0.0.1:9466", OFF(admin_listen),
     "admin HTTP host:port (/metrics /healthz /readyz of the stock saga); none: no port"},
    {"CATALOG_FAULT_KNOBS", SVC_CFG_BOOL, 0, 0, "off", OFF(fault_knobs),
     "TEST ONLY: fault knobs (latency, slot limit, errors) at /debug/fault of the admin port"},
};

svc_err_t cat_config_load(cat_config_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    return svc_cfg_load(table, SVC_COUNTOF(table), c, NULL, errbuf);
}

void cat_config_help(FILE *f)
{
    fprintf(f, "Usage: catalog [--help]\n\n"
               "The ShopMicro catalog service: gRPC shopmicro.catalog.v1.CatalogService on "
               "PostgreSQL,\nand the stock reservation of the saga (OrderCreated from Kafka, "
               "StockReserved or\nStockRejected through its outbox). Configured only by "
               "environment variables. SIGTERM or SIGINT "
               "drains in-flight calls and exits 0.\n\n");
    svc_cfg_print_help(f, table, SVC_COUNTOF(table));
}

void cat_config_log(const cat_config_t *c)
{
    svc_cfg_log("catalog", table, SVC_COUNTOF(table), c);
}
