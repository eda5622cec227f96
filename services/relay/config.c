/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - every setting of the outbox relay, in one table. */
#include "config.h"

#define OFF(f) SVC_CFG_OFF(rly_config_t, f)

static const svc_cfg_entry_t table[] = {
    {"RELAY_DB_DSN", SVC_CFG_STR, 1, 511, "host=127.0.0.1 port=25432 dbname=orders user=postgres",
     OFF(db_dsn), "libpq connection string of the database whose outbox table is relayed"},
    {"RELAY_KAFKA_BROKERS", SVC_CFG_STR, 1, 511, "127.0.0.1:19092", OFF(kafka_brokers),
     "Kafka bootstrap servers host:port[,host:port]"},
    {"RELAY_NAME", SVC_CFG_STR, 1, 63, "relay", OFF(name),
     "Kafka client.id and Postgres application_name of this relay"},
    {"RELAY_LOG_LEVEL", SVC_CFG_LOG_LEVEL, 0, 0, "info", OFF(log_level),
     "debug | info | warn | error"},
    SVC_MEM_CFG_ENTRIES("RELAY", rly_config_t, mem),
    {"RELAY_ADMIN_LISTEN", SVC_CFG_STR, 0, 255, "127.0.0.1:9464", OFF(admin_listen),
     "admin HTTP host:port (/metrics /healthz /readyz); 0 or empty: none"},
    {"RELAY_BATCH_SIZE", SVC_CFG_INT, 1, 10000, "2000", OFF(batch_size),
     "outbox rows read per batch, split evenly over the shards this relay holds"},
    {"RELAY_POLL_INTERVAL_MS", SVC_CFG_INT, 10, 3600000, "5000", OFF(poll_interval_ms),
     "safety net: look for rows this often even without a NOTIFY"},
    {"RELAY_DRAIN_MS", SVC_CFG_INT, 0, 600000, "10000", OFF(drain_ms),
     "on SIGTERM, how long the batch in flight may wait for its delivery reports"},
    {"RELAY_DB_STATEMENT_TIMEOUT_MS", SVC_CFG_INT, 10, 600000, "5000", OFF(db_statement_timeout_ms),
     "server-side limit of one SQL statement"},
    {"RELAY_KAFKA_LINGER_MS", SVC_CFG_INT, 0, 60000, "5", OFF(kafka_linger_ms),
     "librdkafka linger.ms: how long a message may wait to share a request"},
    {"RELAY_KAFKA_DELIVERY_TIMEOUT_MS", SVC_CFG_INT, 1000, 3600000, "10000",
     OFF(kafka_delivery_timeout_ms),
     "librdkafka message.timeout.ms: a message not acknowledged by then fails"},
    {"RELAY_BACKOFF_BASE_MS", SVC_CFG_INT, 1, 60000, "200", OFF(backoff_base_ms),
     "after a failed batch, the first backoff window (doubles per failure, full jitter)"},
    {"RELAY_BACKOFF_CAP_MS", SVC_CFG_INT, 1, 600000, "10000", OFF(backoff_cap_ms),
     "largest backoff window (>= RELAY_BACKOFF_BASE_MS)"},
    {"RELAY_RETENTION_S", SVC_CFG_INT, 0, 315360000, "604800", OFF(retention_s),
     "published outbox rows are deleted once this old (0: once published)"},
    {"RELAY_PRUNE_INTERVAL_MS", SVC_CFG_INT, 0, 86400000, "60000", OFF(prune_interval_ms),
     "how often published rows past RELAY_RETENTION_S are deleted (0: never)"},
};

svc_err_t rly_config_load(rly_config_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = svc_cfg_load(table, SVC_COUNTOF(table), c, NULL, errbuf);

    if (err == SVC_OK && c->backoff_cap_ms < c->backoff_base_ms) {
        svc_errbuf_set(errbuf, "RELAY_BACKOFF_CAP_MS must be >= RELAY_BACKOFF_BASE_MS");
        err = SVC_EINVAL;
    }
    return err;
}

void rly_config_help(FILE *f)
{
    fprintf(f, "Usage: relay [--help]\n\n"
               "The ShopMicro outbox relay: publishes a database's unpublished outbox rows to\n"
               "Kafka (CloudEvents binary mode, docs/events.md), oldest first, and marks each\n"
               "published once its delivery report says so. Configured only by environment\n"
               "variables. SIGTERM or SIGINT lets the batch in flight finish (up to\n"
               "RELAY_DRAIN_MS) and exits 0.\n\n");
    svc_cfg_print_help(f, table, SVC_COUNTOF(table));
}

void rly_config_log(const rly_config_t *c)
{
    svc_cfg_log("relay", table, SVC_COUNTOF(table), c);
}
