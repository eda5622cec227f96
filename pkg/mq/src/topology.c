/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topology.c - the names of one base's exchange and queues, and their
 * idempotent declaration. docs/notifications.md draws the picture.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define BASE_MAX 150 /* leaves room for ".retry.<k>" under the 255 of AMQP */

svc_err_t rmq_topology_validate(const rmq_topology_t *t, char errbuf[static SVC_ERRBUF_LEN])
{
    size_t n = t->base != NULL ? strlen(t->base) : 0;

    if (n == 0 || n > BASE_MAX ||
        strspn(t->base, "abcdefghijklmnopqrstuvwxyz"
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n) {
        svc_errbuf_set(errbuf, "rabbitmq topology: base must be 1..%d of [A-Za-z0-9._-]", BASE_MAX);
        return SVC_EINVAL;
    }
    if (t->n_tiers > RMQ_MAX_TIERS || (t->n_tiers > 0 && t->tier_delay_ms == NULL)) {
        svc_errbuf_set(errbuf, "rabbitmq topology: 0..%d tiers, each with a delay", RMQ_MAX_TIERS);
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < t->n_tiers; i++) {
        if (t->tier_delay_ms[i] < 1 || t->tier_delay_ms[i] > 86400000u) {
            svc_errbuf_set(errbuf, "rabbitmq topology: tier %zu delay %u ms is not 1..86400000",
                           i + 1, (unsigned)t->tier_delay_ms[i]);
            return SVC_EINVAL;
        }
    }
    return SVC_OK;
}

void rmq_topology_name(const rmq_topology_t *t, rmq_name_kind_t kind, unsigned tier,
                       char out[RMQ_NAME_MAX])
{
    switch (kind) {
    case RMQ_NAME_EXCHANGE:
        snprintf(out, RMQ_NAME_MAX, "%s", t->base);
        return;
    case RMQ_NAME_WORK:
        snprintf(out, RMQ_NAME_MAX, "%s.work", t->base);
        return;
    case RMQ_NAME_TIER:
        snprintf(out, RMQ_NAME_MAX, "%s.retry.%u", t->base, tier);
        return;
    case RMQ_NAME_DEAD:
        snprintf(out, RMQ_NAME_MAX, "%s.dead", t->base);
        return;
    }
    out[0] = '\0';
}

static amqp_table_entry_t str_arg(const char *key, const char *value)
{
    amqp_table_entry_t e = {
        .key = amqp_cstring_bytes(key),
        .value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(value)}};
    return e;
}

/* Classic durable queues, named explicitly: a later switch to quorum then
 * fails with PRECONDITION_FAILED naming x-queue-type instead of being
 * ignored (a queue's type cannot change in place). Why classic: see
 * docs/notifications.md. */
#define QUEUE_TYPE "classic"

static svc_err_t declare_queue(rmq_conn_t *c, const char *name, amqp_table_entry_t *args,
                               int n_args, char errbuf[static SVC_ERRBUF_LEN])
{
    amqp_table_t table = {.num_entries = n_args, .entries = args};
    char what[RMQ_NAME_MAX + 32], why[SVC_ERRBUF_LEN] = "";
    const char *broker;
    svc_err_t err;

    snprintf(what, sizeof what, "declare queue %s", name);
    amqp_queue_declare(c->st, RMQ__CHANNEL, amqp_cstring_bytes(name), 0, 1, 0, 0, table);
    err = rmq__reply(c, amqp_get_rpc_reply(c->st), what, why);
    if (err == SVC_EPRECOND) {
        /* The broker's text names the argument and both values; ours names
         * the queue first, so that a cut errbuf still says which. */
        broker = strstr(why, "PRECONDITION_FAILED");
        svc_errbuf_set(errbuf, "queue %s exists with other arguments: %s", name,
                       broker != NULL ? broker : why);
    } else if (err != SVC_OK) {
        svc_errbuf_set(errbuf, "%s", why);
    }
    return err;
}

static svc_err_t declare_tiers(rmq_conn_t *c, const rmq_topology_t *t, const char *exchange,
                               char errbuf[static SVC_ERRBUF_LEN])
{
    char name[RMQ_NAME_MAX];
    svc_err_t err = SVC_OK;

    for (size_t i = 0; i < t->n_tiers && err == SVC_OK; i++) {
        /* Expired messages go back to the work exchange with the work key,
         * so that a retry is an ordinary delivery on B.work again. */
        amqp_table_entry_t args[4] = {
            str_arg("x-queue-type", QUEUE_TYPE),
            str_arg("x-dead-letter-exchange", exchange),
            str_arg("x-dead-letter-routing-key", RMQ_WORK_KEY),
            {.key = amqp_cstring_bytes("x-message-ttl"),
             .value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = t->tier_delay_ms[i]}},
        };
        rmq_topology_name(t, RMQ_NAME_TIER, (unsigned)(i + 1), name);
        err = declare_queue(c, name, args, 4, errbuf);
    }
    return err;
}

static svc_err_t declare_exchange(rmq_conn_t *c, const char *exchange,
                                  char errbuf[static SVC_ERRBUF_LEN])
{
    char what[RMQ_NAME_MAX + 32];
    svc_err_t err;

    snprintf(what, sizeof what, "declare exchange %s", exchange);
    amqp_exchange_declare(c->st, RMQ__CHANNEL, amqp_cstring_bytes(exchange),
                          amqp_cstring_bytes("direct"), 0, 1, 0, 0, amqp_empty_table);
    err = rmq__reply(c, amqp_get_rpc_reply(c->st), what, errbuf);
    if (err == SVC_EPRECOND)
        svc_errbuf_set(errbuf, "exchange %s exists with another type or other flags", exchange);
    return err;
}

static void log_declared(const rmq_conn_t *c, const rmq_topology_t *t)
{
    char kv[256], delays[128] = "";
    size_t off = 0;

    for (size_t i = 0; i < t->n_tiers && off < sizeof delays; i++)
        off += (size_t)snprintf(delays + off, sizeof delays - off, "%s%u", i ? "," : "",
                                (unsigned)t->tier_delay_ms[i]);
    snprintf(kv, sizeof kv, " conn=%s base=%s tiers=%zu tier_delays_ms=%s queue_type=%s", c->name,
             t->base, t->n_tiers, delays[0] ? delays : "-", QUEUE_TYPE);
    if (svc_log_enabled(SVC_LOG_INFO))
        svc_log_write(SVC_LOG_INFO, RMQ__LOG_MODULE, kv, "topology declared");
}

svc_err_t rmq_topology_declare(rmq_conn_t *c, const rmq_topology_t *t,
                               char errbuf[static SVC_ERRBUF_LEN])
{
    char exchange[RMQ_NAME_MAX], work[RMQ_NAME_MAX], dead[RMQ_NAME_MAX];
    svc_err_t err = rmq_topology_validate(t, errbuf);

    if (err == SVC_OK)
        err = rmq__conn_check(c, errbuf);
    if (err != SVC_OK)
        return err;
    rmq_topology_name(t, RMQ_NAME_EXCHANGE, 0, exchange);
    rmq_topology_name(t, RMQ_NAME_WORK, 0, work);
    rmq_topology_name(t, RMQ_NAME_DEAD, 0, dead);
    {
        amqp_table_entry_t dead_args[1] = {str_arg("x-queue-type", QUEUE_TYPE)};
        /* A work message a consumer rejects (basic.reject/nack without
         * requeue) lands in B.dead instead of vanishing. */
        amqp_table_entry_t work_args[3] = {
            str_arg("x-queue-type", QUEUE_TYPE),
            str_arg("x-dead-letter-exchange", ""),
            str_arg("x-dead-letter-routing-key", dead),
        };
        err = declare_exchange(c, exchange, errbuf);
        if (err == SVC_OK)
            err = declare_queue(c, dead, dead_args, 1, errbuf);
        if (err == SVC_OK)
            err = declare_queue(c, work, work_args, 3, errbuf);
    }
    if (err == SVC_OK) {
        amqp_queue_bind(c->st, RMQ__CHANNEL, amqp_cstring_bytes(work), amqp_cstring_bytes(exchange),
                        amqp_cstring_bytes(RMQ_WORK_KEY), amqp_empty_table);
        err = rmq__reply(c, amqp_get_rpc_reply(c->st), "bind the work queue", errbuf);
    }
    if (err == SVC_OK)
        err = declare_tiers(c, t, exchange, errbuf);
    if (err == SVC_OK)
        log_declared(c, t);
    return err;
}
