/* SPDX-License-Identifier: Apache-2.0 */
/* ops.c - one service's admin port and health answers (see ops/ops.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

#define MAX_CHECKS 3 /* database, upstreams, the service's own */

struct ops {
    ops_opts_t o;
    char service[64];
    char admin_listen[256];
    db_probe_t *probe;
    _Atomic(const rpc_server_t *) srv;
    admin_server_t *admin;
};

svc_err_t ops_new(const ops_opts_t *o, ops_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    ops_t *ops = calloc(1, sizeof *ops);
    svc_err_t err = SVC_OK;

    *out = NULL;
    if (ops == NULL)
        return SVC_ENOMEM;
    ops->o = *o;
    snprintf(ops->service, sizeof ops->service, "%s", o->service);
    snprintf(ops->admin_listen, sizeof ops->admin_listen, "%s", o->admin_listen);
    ops->o.service = ops->service;
    ops->o.admin_listen = ops->admin_listen;
    if (o->db_dsn != NULL)
        err = db_probe_new(o->db_dsn, ops->service, &ops->probe, errbuf);
    ops->o.db_dsn = NULL; /* the probe has its own copy */
    if (err != SVC_OK) {
        free(ops);
        return err;
    }
    *out = ops;
    return SVC_OK;
}

void ops_rpc_opts(ops_t *ops, rpc_server_opts_t *ro)
{
    ro->health = ops_health;
    ro->health_ctx = ops;
}

void ops_set_server(ops_t *ops, const rpc_server_t *srv)
{
    atomic_store(&ops->srv, srv);
}

/* ---- readiness ------------------------------------------------------------ */

/* Ready while at least one upstream can be tried: with every breaker open
 * each call fails at once, so a load balancer should send work elsewhere. */
static void check_upstreams(const ops_t *ops, admin_check_t *c)
{
    size_t open = 0;
    int n = 0;

    c->name = "upstreams";
    c->detail[0] = '\0';
    for (size_t i = 0; i < ops->o.n_upstreams; i++) {
        rs_breaker_state_t st = rs_upstream_breaker_state(ops->o.upstreams[i]);
        open += st == RS_BREAKER_OPEN;
        if (n >= 0 && (size_t)n < sizeof c->detail)
            n += snprintf(c->detail + n, sizeof c->detail - (size_t)n, "%s%s: breaker %s",
                          i > 0 ? ", " : "", rs_upstream_name(ops->o.upstreams[i]),
                          rs_breaker_state_name(st));
    }
    c->ok = open < ops->o.n_upstreams;
}

/* /readyz asks every check; gRPC health only those without which no RPC
 * can work (rpc_only): the database. */
static size_t checks(ops_t *ops, admin_check_t out[MAX_CHECKS], bool rpc_only)
{
    size_t n = 0;

    if (ops->probe != NULL) {
        out[n].name = "database";
        out[n].ok = db_probe_check(ops->probe, out[n].detail, sizeof out[n].detail);
        n++;
    }
    if (rpc_only)
        return n;
    if (ops->o.n_upstreams > 0)
        check_upstreams(ops, &out[n++]);
    if (ops->o.check != NULL) {
        out[n].name = "";
        out[n].ok = true;
        out[n].detail[0] = '\0';
        ops->o.check(ops->o.ctx, &out[n++]);
    }
    return n;
}

bool ops_health(void *ctx, char *why, size_t cap)
{
    admin_check_t c[MAX_CHECKS];
    size_t n = checks(ctx, c, true);

    for (size_t i = 0; i < n; i++)
        if (!c[i].ok) {
            snprintf(why, cap, "%s: %s", c[i].name, c[i].detail);
            return false;
        }
    return true;
}

static bool admin_ready(void *ctx, admin_buf_t *out)
{
    admin_check_t c[MAX_CHECKS];
    size_t n = checks(ctx, c, false);

    return admin_ready_write(out, c, n);
}

/* ---- metrics ------------------------------------------------------------ */

static svc_err_t render_rpc(const void *arg, char *buf, size_t cap, size_t *len)
{
    return rpc_server_metrics_render(arg, buf, cap, len);
}

static svc_err_t render_upstreams(const void *arg, char *buf, size_t cap, size_t *len)
{
    const ops_t *ops = arg;

    return rs_metrics_render(ops->o.upstreams, ops->o.n_upstreams, buf, cap, len);
}

static svc_err_t render_db(const void *arg, char *buf, size_t cap, size_t *len)
{
    (void)arg;
    return db_metrics_render(buf, cap, len);
}

static void admin_metrics(void *ctx, admin_buf_t *out)
{
    ops_t *ops = ctx;
    const rpc_server_t *srv = atomic_load(&ops->srv);
    char detail[SVC_ERRBUF_LEN];

    if (srv != NULL)
        admin_buf_render(out, render_rpc, srv);
    if (ops->o.n_upstreams > 0)
        admin_buf_render(out, render_upstreams, ops);
    if (ops->probe != NULL) {
        admin_buf_render(out, render_db, NULL);
        admin_buf_printf(out,
                         "# HELP shopmicro_db_up Whether the database answered the readiness "
                         "probe (SELECT 1).\n# TYPE shopmicro_db_up gauge\nshopmicro_db_up %d\n",
                         db_probe_check(ops->probe, detail, sizeof detail) ? 1 : 0);
    }
    if (ops->o.metrics != NULL)
        ops->o.metrics(ops->o.ctx, out);
}

/* ---- /debug: the live resilience feed, then the service's own routes ---- */

static svc_err_t render_snapshot(const void *arg, char *buf, size_t cap, size_t *len)
{
    const ops_t *ops = arg;

    return rs_snapshot_json(ops->o.upstreams, ops->o.n_upstreams, buf, cap, len);
}

/* The gateway's page polls this from the gateway's origin, so it carries
 * Access-Control-Allow-Origin: *. It is read-only and says no more than
 * /metrics does; the service's own /debug routes (catalog's fault knobs)
 * do not get the header. */
static int resilience_feed(const ops_t *ops, const admin_request_t *req, admin_buf_t *out)
{
    if (strcmp(req->method, "GET") != 0) {
        admin_buf_printf(out, "{\"error\":\"%s is read-only: GET it\"}\n", OPS_RESILIENCE_FEED);
        return 405;
    }
    admin_buf_allow_any_origin(out);
    admin_buf_printf(out, "{\"service\":");
    admin_buf_json_str(out, ops->service);
    admin_buf_printf(out, ",\"resilience\":");
    admin_buf_render(out, render_snapshot, ops);
    admin_buf_printf(out, "}\n");
    return 200;
}

static int admin_debug(void *ctx, const admin_request_t *req, admin_buf_t *out)
{
    const ops_t *ops = ctx;

    if (strcmp(req->path, OPS_RESILIENCE_FEED) == 0)
        return resilience_feed(ops, req, out);
    if (ops->o.debug != NULL)
        return ops->o.debug(ops->o.debug_ctx, req, out);
    admin_buf_printf(out, "{\"error\":\"not found: this port's debug page is %s\"}\n",
                     OPS_RESILIENCE_FEED);
    return 404;
}

svc_err_t ops_start(ops_t *ops, char errbuf[static SVC_ERRBUF_LEN])
{
    admin_opts_t o;

    admin_opts_init(&o);
    o.listen = ops->admin_listen;
    o.metrics = admin_metrics;
    o.ready = admin_ready;
    o.ctx = ops;
    o.debug = admin_debug;
    o.debug_ctx = ops;
    o.log_module = ops->service;
    return admin_server_new(&o, &ops->admin, errbuf);
}

void ops_free(ops_t *ops)
{
    if (ops == NULL)
        return;
    admin_server_free(ops->admin);
    db_probe_free(ops->probe);
    free(ops);
}
