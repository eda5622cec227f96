/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - wires the order service into pkg/rpc: each worker owns a store
 * (one database connection); all share the catalog client. Migrations and a
 * first sweep of expired idempotency keys run before the port opens. The
 * saga's consumer (saga.h, kafka/worker.h) runs beside the gRPC workers on a
 * thread and a store of its own, from before serving until after the drain.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin/admin.h"
#include "ops/ops.h"
#include "shopmicro/descriptors.h"
#include "kafka/worker.h"
#include "order.h"
#include "saga.h"
#include "store.h"

#define STARTUP_EXPIRE_MS      5000
#define STARTUP_EXPIRE_BATCHES 100

static void *worker_init(int index, void *app, char errbuf[static SVC_ERRBUF_LEN])
{
    const ord_app_t *a = app;
    ord_worker_t *w = calloc(1, sizeof *w);

    (void)index;
    if (w == NULL) {
        svc_errbuf_set(errbuf, "out of memory");
        return NULL;
    }
    if (ord_store_new(a->cfg->db_dsn, (int)a->cfg->db_statement_timeout_ms, &w->store, errbuf) !=
        SVC_OK) {
        free(w);
        return NULL;
    }
    return w;
}

static void worker_fini(void *state)
{
    ord_worker_t *w = state;

    if (w == NULL)
        return;
    ord_store_free(w->store);
    free(w);
}

/* Keys left from before a restart (or a long idle time) go at start-up, on
 * a connection of its own; the workers keep up from then on. */
static void expire_at_startup(const ord_config_t *cfg)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ord_store_t *st = NULL;

    if (ord_store_new(cfg->db_dsn, (int)cfg->db_statement_timeout_ms, &st, errbuf) != SVC_OK) {
        svc_log_warn("order", "expiring idempotency keys: %s", errbuf);
        return;
    }
    ord_keys_expire(st, cfg, svc_now_ns() + (uint64_t)STARTUP_EXPIRE_MS * SVC_NS_PER_MS,
                    STARTUP_EXPIRE_BATCHES);
    ord_store_free(st);
}

/* The saga's consumer and the store only its thread uses. */
typedef struct saga_run {
    ord_store_t *store;
    ord_saga_t saga;
    kfk_worker_t *worker;
} saga_run_t;

#define NO_CONSUMER "ORDER_KAFKA_BROKERS=none: no saga consumer, so orders stay PENDING"

static svc_err_t saga_start(const ord_config_t *cfg, saga_run_t *s,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    static const char *const topics[] = {ORD_SAGA_TOPIC, NULL};
    svc_err_t err;

    if (strcmp(cfg->saga.brokers, "none") == 0) /* no store for a consumer that never runs */
        return kfk_worker_start_cfg(&cfg->saga, topics, "order",
                                    &(kfk_worker_handler_t){ord_saga_handle, NULL, NULL},
                                    ORD_SAGA_LOG_MODULE, NO_CONSUMER, &s->worker, errbuf);
    err = ord_store_new(cfg->db_dsn, (int)cfg->db_statement_timeout_ms, &s->store, errbuf);
    if (err != SVC_OK)
        return err;
    s->saga.store = s->store;
    return kfk_worker_start_cfg(
        &cfg->saga, topics, "order",
        &(kfk_worker_handler_t){ord_saga_handle, &ord_saga_batch_ops, &s->saga},
        ORD_SAGA_LOG_MODULE, NO_CONSUMER, &s->worker, errbuf);
}

/* The admin port's callbacks, on its thread: they read the worker's
 * guarded state and the consumer's atomics only. */
static void saga_metrics(void *ctx, admin_buf_t *out)
{
    saga_run_t *s = ctx;
    char *text;

    if (s->worker == NULL)
        return;
    text = kfk_worker_metrics_text(s->worker, "shopmicro_order_saga_consumer");
    admin_buf_printf(out, "%s", text != NULL ? text : "");
    free(text);
}

static void saga_check(void *ctx, admin_check_t *c)
{
    saga_run_t *s = ctx;

    c->name = "saga_consumer";
    if (s->worker == NULL) {
        c->ok = true;
        snprintf(c->detail, sizeof c->detail, "off (ORDER_KAFKA_BROKERS=none)");
        return;
    }
    c->ok = kfk_worker_healthy(s->worker, c->detail, sizeof c->detail);
}

/* After the gRPC drain: the event in hand commits (or is handed again to
 * the next owner), the offsets are committed, the group is left. */
static void saga_stop(saga_run_t *s)
{
    kfk_worker_stop(s->worker);
    ord_store_free(s->store);
}

int ord_server_run(const ord_config_t *cfg, rs_grpc_client_t *catalog)
{
    saga_run_t saga = {0};
    rs_upstream_t *upstreams[] = {rs_grpc_client_upstream(catalog)};
    ops_opts_t oo = {
        .service = "order",
        .admin_listen = cfg->admin_listen,
        .db_dsn = cfg->db_dsn,
        .upstreams = upstreams,
        .n_upstreams = SVC_COUNTOF(upstreams),
        .metrics = saga_metrics,
        .check = saga_check,
        .ctx = &saga,
    };
    ops_t *ops = NULL;
    char errbuf[SVC_ERRBUF_LEN] = "";
    ord_app_t app = {cfg, catalog};
    rpc_server_opts_t o;
    rpc_server_t *srv = NULL;
    int status = 1;

    if (ord_store_migrate(cfg->db_dsn, cfg->db_startup_wait_ms, errbuf) != SVC_OK) {
        svc_log_error("order", "cannot prepare the database: %s", errbuf);
        return 1;
    }
    expire_at_startup(cfg);
    if (ops_new(&oo, &ops, errbuf) != SVC_OK) {
        svc_log_error("order", "%s", errbuf);
        return 1;
    }
    rpc_server_opts_init(&o);
    ops_rpc_opts(ops, &o);
    o.descriptor_set = shopmicro_order_descriptor_set;
    o.descriptor_set_len = shopmicro_order_descriptor_set_len;
    o.listen = cfg->listen;
    o.workers = (int)cfg->workers;
    o.drain_ms = (int)cfg->drain_ms;
    o.log_module = "order";
    o.app = &app;
    o.worker_init = worker_init;
    o.worker_fini = worker_fini;
    if (rpc_server_new(&o, ord_methods, ord_methods_count, &srv, errbuf) != SVC_OK) {
        svc_log_error("order", "%s", errbuf);
        goto out;
    }
    ops_set_server(ops, srv);
    if (saga_start(cfg, &saga, errbuf) != SVC_OK) {
        svc_log_error("order", "saga consumer: %s", errbuf);
        goto out;
    }
    /* Bound before serving: a port in use is a start-up error. */
    if (ops_start(ops, errbuf) != SVC_OK) {
        svc_log_error("order", "admin port %s: %s", cfg->admin_listen, errbuf);
        goto out;
    }
    if (rpc_server_run(srv, errbuf) != SVC_OK) {
        svc_log_error("order", "%s", errbuf);
        goto out;
    }
    status = 0;
out:
    ops_free(ops); /* first: its callbacks read the saga and the server */
    saga_stop(&saga);
    rpc_server_free(srv);
    return status;
}
