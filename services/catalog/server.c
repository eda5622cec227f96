/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - wires the catalog into pkg/rpc: each worker owns a store (and
 * so one database connection); migrations run before the port opens.
 */
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "saga.h"
#include "store.h"

static void *worker_init(int index, void *app, char *errbuf)
{
    const cat_config_t *cfg = app;
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

/* The database may still be starting (compose, a reboot): wait for it a
 * bounded time rather than failing the first instant. */
static svc_err_t migrate_with_wait(const cat_config_t *cfg, char *errbuf)
{
    uint64_t until = svc_now_ms() + (uint64_t)cfg->db_startup_wait_ms;
    bool told = false;
    svc_err_t err;

    while ((err = cat_store_migrate(cfg->db_dsn, errbuf)) == SVC_EUNAVAIL &&
           svc_now_ms() < until) {
        if (!told)
            svc_log_warn("catalog", "waiting up to %lld ms for the database: %s",
                         (long long)cfg->db_startup_wait_ms, errbuf);
        told = true;
        nanosleep(&(struct timespec){0, 250 * 1000 * 1000}, NULL);
    }
    return err;
}

int cat_server_run(const cat_config_t *cfg)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    rpc_server_opts_t o;
    rpc_server_t *srv = NULL;
    cat_saga_t *saga = NULL;
    admin_server_t *admin = NULL;
    int status = 1;

    if (migrate_with_wait(cfg, errbuf) != SVC_OK) {
        svc_log_error("catalog", "cannot prepare the database: %s", errbuf);
        return 1;
    }
    rpc_server_opts_init(&o);
    o.listen = cfg->listen;
    o.workers = (int)cfg->workers;
    o.drain_ms = (int)cfg->drain_ms;
    o.log_module = "catalog";
    o.app = (void *)cfg;
    o.worker_init = worker_init;
    o.worker_fini = worker_fini;
    if (rpc_server_new(&o, cat_methods, cat_methods_count, &srv, errbuf) != SVC_OK) {
        svc_log_error("catalog", "%s", errbuf);
        goto out;
    }
    /* After migrations (its tables), before serving; stopped after the
     * drain, so an order's reservation in flight at SIGTERM finishes. */
    if (cat_saga_start(cfg, &saga, errbuf) != SVC_OK) {
        svc_log_error("catalog", "stock saga: %s", errbuf);
        goto out;
    }
    /* Bound before serving: a port in use is a start-up error, not a silent
     * lack of metrics. */
    if (admin_server_start(cfg->admin_listen, cat_saga_metrics, cat_saga_ready, saga, &admin,
                           errbuf) != SVC_OK) {
        svc_log_error("catalog", "admin port %s: %s", cfg->admin_listen, errbuf);
        goto out;
    }
    if (rpc_server_run(srv, errbuf) != SVC_OK) {
        svc_log_error("catalog", "%s", errbuf);
        goto out;
    }
    status = 0;
out:
    admin_server_free(admin); /* first: its callbacks read the saga */
    cat_saga_stop(saga);
    rpc_server_free(srv);
    return status;
}
