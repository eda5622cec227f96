/* SPDX-License-Identifier: Apache-2.0 */
/* ops.c - /healthz, /readyz and /metrics (see ops.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <h2o.h>

#include "dispatch.h"
#include "http.h"
#include "ops.h"

static void reply_text(h2o_mem_pool_t *pool, gw_reply_t *out, int status, const char *ctype,
                       const char *text, size_t len)
{
    out->status = status;
    out->content_type = ctype;
    out->body = h2o_strdup(pool, text, len).base;
    out->len = len;
}

void gw_ops_healthz(struct gw_app *app, h2o_mem_pool_t *pool, gw_reply_t *out)
{
    (void)app;
    reply_text(pool, out, 200, "application/json", H2O_STRLIT("{\"status\":\"ok\"}"));
}

static size_t append(char *buf, size_t cap, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t append(char *buf, size_t cap, size_t n, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (n >= cap)
        return n;
    va_start(ap, fmt);
    k = vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
    return k < 0 ? cap : n + (size_t)k;
}

void gw_ops_readyz(struct gw_app *app, h2o_mem_pool_t *pool, gw_reply_t *out)
{
    char list[1536];
    size_t n = 0, cap;
    bool draining = atomic_load(&app->draining), ready = !draining;
    char *body;
    int len;

    list[0] = '\0';
    for (int id = 0; id < GW_UPSTREAM_COUNT; id++) {
        rs_grpc_client_t *cl = gw_upstream_client(app->ups, (gw_upstream_id_t)id);
        rs_breaker_state_t st = rs_upstream_breaker_state(rs_grpc_client_upstream(cl));
        const char *conn = rs_grpc_client_connectivity(cl);
        const char *target = gw_upstream_target(app->ups, (gw_upstream_id_t)id);
        bool ok = st != RS_BREAKER_OPEN && strcmp(conn, "transient-failure") != 0 &&
                  strcmp(conn, "shutdown") != 0;

        ready = ready && ok;
        n = append(list, sizeof list, n, "%s{\"name\":\"%s\",\"target\":\"", id > 0 ? "," : "",
                   gw_upstream_name((gw_upstream_id_t)id));
        n = gw_json_escape(list, sizeof list, n, target, strlen(target));
        n = append(list, sizeof list, n,
                   "\",\"breaker\":\"%s\",\"connectivity\":\"%s\",\"ready\":%s}",
                   rs_breaker_state_name(st), conn, ok ? "true" : "false");
    }
    if (n >= sizeof list) {
        reply_text(pool, out, 500, "application/json",
                   H2O_STRLIT("{\"code\":13,\"message\":\"readiness report too long\","
                              "\"details\":[]}"));
        return;
    }
    cap = n + 64;
    body = h2o_mem_alloc_pool(pool, cap);
    len = snprintf(body, cap, "{\"status\":\"%s\",\"upstreams\":[%s]}",
                   draining ? "draining" : ready ? "ok" : "unavailable", list);
    out->status = ready ? 200 : 503;
    out->content_type = "application/json";
    out->body = body;
    out->len = (size_t)len;
}

void gw_ops_metrics(struct gw_app *app, h2o_mem_pool_t *pool, gw_reply_t *out)
{
    rs_upstream_t *ups[GW_UPSTREAM_COUNT];
    const gw_failfast_t *ff = gw_upstream_failfast(app->ups);
    char *text = NULL;
    size_t len = 0, need = 0, ff_len = 0;
    gw_cache_stats_t cache;
    svc_err_t err;

    for (int id = 0; id < GW_UPSTREAM_COUNT; id++)
        ups[id] = rs_grpc_client_upstream(gw_upstream_client(app->ups, (gw_upstream_id_t)id));
    if (app->stale != NULL)
        gw_cache_stats(app->stale, &cache);
    err = gw_metrics_render(app->metrics, app->stale != NULL ? &cache : NULL, &text, &len);
    if (err == SVC_OK) {
        (void)gw_failfast_render(ff, NULL, 0, &ff_len);
        ff_len += 64; /* room for counts that gain digits before the second pass */
    }
    if (err == SVC_OK)
        err = rs_metrics_render(ups, GW_UPSTREAM_COUNT, NULL, 0, &need);
    if (err == SVC_OK || err == SVC_ERANGE) {
        char *body = h2o_mem_alloc_pool(pool, len + ff_len + need + 1);
        size_t got = 0;

        memcpy(body, text, len);
        if (gw_failfast_render(ff, body + len, ff_len + 1, &got) == SVC_OK)
            len += got;
        got = 0;
        err = rs_metrics_render(ups, GW_UPSTREAM_COUNT, body + len, need + 1, &got);
        if (err == SVC_ERANGE) /* grew between the two calls: keep what fits */
            got = need;
        out->status = 200;
        out->content_type = "text/plain; version=0.0.4; charset=utf-8";
        out->body = body;
        out->len = len + (got < need ? got : need);
        free(text);
        return;
    }
    free(text);
    reply_text(pool, out, 500, "application/json",
               H2O_STRLIT("{\"code\":13,\"message\":\"cannot render metrics\",\"details\":[]}"));
}
