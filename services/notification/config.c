/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - every setting of the notification service, in one table. */
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define OFF(f) SVC_CFG_OFF(ntf_config_t, f)

static const svc_cfg_entry_t table[] = {
    KFK_WORKER_CFG_ROWS("NOTIFY", ntf_config_t, events, "notification",
                        "the order events that become notifications"),
    {"NOTIFY_RABBITMQ_HOST", SVC_CFG_STR, 1, 255, "127.0.0.1", OFF(rabbitmq_host),
     "RabbitMQ host of the notification jobs"},
    {"NOTIFY_RABBITMQ_PORT", SVC_CFG_INT, 1, 65535, "25772", OFF(rabbitmq_port),
     "RabbitMQ AMQP port"},
    {"NOTIFY_RABBITMQ_USER", SVC_CFG_STR, 1, 255, "guest", OFF(rabbitmq_user), "RabbitMQ user"},
    {"NOTIFY_RABBITMQ_PASSWORD", SVC_CFG_STR, 0, 255, "guest", OFF(rabbitmq_password),
     "RabbitMQ password"},
    {"NOTIFY_RABBITMQ_VHOST", SVC_CFG_STR, 1, 255, "/", OFF(rabbitmq_vhost), "RabbitMQ vhost"},
    {"NOTIFY_QUEUE_BASE", SVC_CFG_STR, 1, 150, "shopmicro.notifications", OFF(queue_base),
     "base name of the exchange and queues (B.work, B.retry.<k>, B.dead)"},
    {"NOTIFY_RETRY_TIERS_MS", SVC_CFG_STR, 1, 255, "1000,10000,60000", OFF(retry_tiers_ms),
     "delays of the retry tiers, rising, comma-separated (at most 8)"},
    {"NOTIFY_WEBHOOK_URL", SVC_CFG_STR, 1, 511, "http://127.0.0.1:8090/webhooks", OFF(webhook_url),
     "where every notification is POSTed"},
    {"NOTIFY_WEBHOOK_SECRET", SVC_CFG_STR, 0, 511, "", OFF(webhook_secret),
     "Standard Webhooks signing secrets, whsec_<base64> of 24..64 random bytes, space- or "
     "comma-separated (a rotation: each signs); this or NOTIFY_WEBHOOK_SECRET_FILE is required"},
    {"NOTIFY_WEBHOOK_SECRET_FILE", SVC_CFG_STR, 0, 511, "", OFF(webhook_secret_file),
     "a file (mode 0600) holding NOTIFY_WEBHOOK_SECRET's value, read at start; set one of the two"},
    {"NOTIFY_WORKERS", SVC_CFG_INT, 1, 64, "4", OFF(workers),
     "delivery threads, each with its own RabbitMQ consumer"},
    {"NOTIFY_PREFETCH", SVC_CFG_INT, 1, 1000, "4", OFF(prefetch),
     "unacked jobs RabbitMQ sends ahead to each delivery thread"},
    {"NOTIFY_JOB_DEADLINE_MS", SVC_CFG_INT, 100, 600000, "10000", OFF(job_deadline_ms),
     "all HTTP attempts of one job's pass, backoffs and Retry-After waits included"},
    {"NOTIFY_ATTEMPT_TIMEOUT_MS", SVC_CFG_INT, 10, 600000, "3000", OFF(attempt_timeout_ms),
     "one HTTP attempt (inside the job's deadline)"},
    {"NOTIFY_MAX_ATTEMPTS", SVC_CFG_INT, 1, 20, "4", OFF(max_attempts),
     "HTTP attempts per pass before the job moves to the next retry tier"},
    {"NOTIFY_WEBHOOK_BREAKER_FAILURES", SVC_CFG_INT, 0, 100000, "5", OFF(breaker_failures),
     "consecutive failed webhook passes that open a destination's breaker (0: never)"},
    {"NOTIFY_WEBHOOK_BREAKER_COOLDOWN_MS", SVC_CFG_INT, 1, 3600000, "10000",
     OFF(breaker_cooldown_ms), "how long an open breaker fails jobs at once (to the next tier)"},
    {"NOTIFY_ADMIN_LISTEN", SVC_CFG_STR, 0, 255, "127.0.0.1:9468", OFF(admin_listen),
     "admin HTTP host:port (/metrics /healthz /readyz); none: no admin port"},
    {"NOTIFY_LOG_LEVEL", SVC_CFG_LOG_LEVEL, 0, 0, "info", OFF(log_level),
     "debug | info | warn | error"},
    SVC_MEM_CFG_ENTRIES("NOTIFY", ntf_config_t, mem),
};

svc_err_t ntf_parse_tiers(const char *text, uint32_t *tiers, size_t *n,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    const char *p = text;

    *n = 0;
    while (*p != '\0') {
        char *end;
        long long v = strtoll(p, &end, 10);

        if (end == p || (*end != ',' && *end != '\0') || v < 1 || v > 86400000) {
            svc_errbuf_set(errbuf,
                           "NOTIFY_RETRY_TIERS_MS: '%.64s' is not a list of delays "
                           "of 1..86400000 ms",
                           text);
            return SVC_EINVAL;
        }
        if (*n == RMQ_MAX_TIERS || (*n > 0 && (uint32_t)v <= tiers[*n - 1])) {
            svc_errbuf_set(errbuf,
                           "NOTIFY_RETRY_TIERS_MS: at most %d delays, each longer "
                           "than the one before",
                           RMQ_MAX_TIERS);
            return SVC_EINVAL;
        }
        tiers[(*n)++] = (uint32_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0') {
            svc_errbuf_set(errbuf, "NOTIFY_RETRY_TIERS_MS: '%.64s' ends with a comma", text);
            return SVC_EINVAL;
        }
    }
    if (*n == 0) {
        svc_errbuf_set(errbuf, "NOTIFY_RETRY_TIERS_MS: at least one delay");
        return SVC_EINVAL;
    }
    return SVC_OK;
}

svc_err_t ntf_config_load(ntf_config_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = svc_cfg_load(table, SVC_COUNTOF(table), c, NULL, errbuf);

    if (err == SVC_OK)
        err = ntf_parse_tiers(c->retry_tiers_ms, c->tiers, &c->n_tiers, errbuf);
    if (err == SVC_OK && c->attempt_timeout_ms > c->job_deadline_ms) {
        svc_errbuf_set(errbuf, "NOTIFY_ATTEMPT_TIMEOUT_MS must not exceed NOTIFY_JOB_DEADLINE_MS");
        err = SVC_EINVAL;
    }
    if (err == SVC_OK && strncmp(c->webhook_url, "http://", 7) != 0 &&
        strncmp(c->webhook_url, "https://", 8) != 0) {
        svc_errbuf_set(errbuf, "NOTIFY_WEBHOOK_URL must be an http:// or https:// URL");
        err = SVC_EINVAL;
    }
    return err;
}

void ntf_config_help(FILE *f)
{
    fprintf(
        f,
        "Usage: notification [--help]\n\n"
        "The ShopMicro notification service: turns every OrderConfirmed and\n"
        "OrderCancelled on Kafka into a durable RabbitMQ job, and delivers each job as a\n"
        "signed webhook through pkg/resilience, with retry tiers and a dead-letter queue\n"
        "(docs/notifications.md). Configured only by environment variables. SIGTERM or\n"
        "SIGINT lets deliveries in flight finish (up to NOTIFY_JOB_DEADLINE_MS) and exits 0.\n\n");
    svc_cfg_print_help(f, table, SVC_COUNTOF(table));
}

void ntf_config_log(const ntf_config_t *c)
{
    svc_cfg_log("notification", table, SVC_COUNTOF(table), c);
}

void ntf_config_conn_opts(const ntf_config_t *c, const char *name, rmq_conn_opts_t *o)
{
    rmq_conn_opts_init(o);
    o->host = c->rabbitmq_host;
    o->port = (int)c->rabbitmq_port;
    o->user = c->rabbitmq_user;
    o->password = c->rabbitmq_password;
    o->vhost = c->rabbitmq_vhost;
    o->name = name;
}

void ntf_config_topology(const ntf_config_t *c, rmq_topology_t *t)
{
    t->base = c->queue_base;
    t->tier_delay_ms = c->tiers;
    t->n_tiers = c->n_tiers;
}
