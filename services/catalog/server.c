/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - wires the catalog into pkg/rpc: each worker owns a store (and
 * so one database connection); migrations run before the port opens.
 */
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "ops/ops.h"
#include "shopmicro/descriptors.h"
#include "saga.h"
#include "store.h"

static void *worker_init(int index, void *app, char errbuf[static SVC_ERRBUF_LEN])
{
    const cat_config_t *cfg = ((const cat_app_t *)app)->cfg;
    cat_store_t *st = NULL;

    (void)index;
    if (cat_store_new(cfg->db_dsn, (int)cfg->db_statement_timeout_ms, &st, errbuf) != SVC_OK)
        return NULL;
    return st;
}

static void worker_fini(void *state)
{
    cat_store_free(state);
}

/* The service's own part of the admin port: the saga's page and check,
 * and with the fault knobs on, their page too. */
typedef struct admin_ctx {
    cat_saga_t *saga;
    cat_fault_t *fault;
} admin_ctx_t;

static void admin_metrics(void *ctx, admin_buf_t *out)
{
    const admin_ctx_t *a = ctx;

    cat_saga_metrics(a->saga, out);
    if (a->fault != NULL)
        cat_fault_metrics(a->fault, out);
}

static void admin_check(void *ctx, admin_check_t *c)
{
    cat_saga_check(((const admin_ctx_t *)ctx)->saga, c);
}

static svc_err_t ops_create(const cat_config_t *cfg, admin_ctx_t *a, ops_t **out,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    ops_opts_t o = {
        .service = "catalog",
        .admin_listen = cfg->admin_listen,
        .db_dsn = cfg->db_dsn,
        .metrics = admin_metrics,
        .check = admin_check,
        .ctx = a,
    };

    if (a->fault != NULL) {
        o.debug = cat_fault_debug;
        o.debug_ctx = a->fault;
        svc_log_warn("catalog",
                     "CATALOG_FAULT_KNOBS=on: test-only fault knobs at "
                     "http://%s/debug/fault",
                     cfg->admin_listen);
    }
    return ops_new(&o, out, errbuf);
}

int cat_server_run(const cat_config_t *cfg)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    rpc_server_opts_t o;
    rpc_server_t *srv = NULL;
    cat_app_t app = {cfg, NULL};
    admin_ctx_t actx = {NULL, NULL};
    ops_t *ops = NULL;
    int status = 1;

    if (cat_store_migrate(cfg->db_dsn, cfg->db_startup_wait_ms, errbuf) != SVC_OK) {
        svc_log_error("catalog", "cannot prepare the database: %s", errbuf);
        return 1;
    }
    if (cfg->fault_knobs && cat_fault_new(&app.fault) != SVC_OK) {
        svc_log_error("catalog", "fault knobs: out of memory");
        return 1;
    }
    actx.fault = app.fault;
    if (ops_create(cfg, &actx, &ops, errbuf) != SVC_OK) {
        svc_log_error("catalog", "%s", errbuf);
        goto out;
    }
    rpc_server_opts_init(&o);
    ops_rpc_opts(ops, &o);
    o.descriptor_set = shopmicro_catalog_descriptor_set;
    o.descriptor_set_len = shopmicro_catalog_descriptor_set_len;
    o.listen = cfg->listen;
    o.workers = (int)cfg->workers;
    o.drain_ms = (int)cfg->drain_ms;
    o.log_module = "catalog";
    o.app = &app;
    o.worker_init = worker_init;
    o.worker_fini = worker_fini;
    if (rpc_server_new(&o, cat_methods, cat_methods_count, &srv, errbuf) != SVC_OK) {
        svc_log_error("catalog", "%s", errbuf);
        goto out;
    }
    ops_set_server(ops, srv);
    /* After migrations (its tables), before serving; stopped after the
     * drain, so an order's reservation in flight at SIGTERM finishes. */
    if (cat_saga_start(cfg, &actx.saga, errbuf) != SVC_OK) {
        svc_log_error("catalog", "stock saga: %s", errbuf);
        goto out;
    }
    /* Bound before serving: a port in use is a start-up error, not a silent
     * lack of metrics. */
    if (ops_start(ops, errbuf) != SVC_OK) {
        svc_log_error("catalog", "admin port %s: %s", cfg->admin_listen, errbuf);
        goto out;
    }
    if (rpc_server_run(srv, errbuf) != SVC_OK) {
        svc_log_error("catalog", "%s", errbuf);
        goto out;
    }
    status = 0;
out:
    ops_free(ops); /* first: its callbacks read the saga, the knobs and the server */
    cat_saga_stop(actx.saga);
    rpc_server_free(srv);
    cat_fault_free(app.fault); /* after the server: its workers use it */
    return status;
}
