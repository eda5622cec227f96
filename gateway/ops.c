/* SPDX-License-Identifier: Apache-2.0 */
/* ops.c - the public /healthz, /readyz and /openapi.json, and readiness (see ops.h). */
#include <stdio.h>
#include <string.h>

#include <h2o.h>

#include "dispatch.h"
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

bool gw_ops_ready(struct gw_app *app, gw_upstream_health_t *h)
{
    bool ready = !atomic_load(&app->draining);

    for (int id = 0; id < GW_UPSTREAM_COUNT; id++) {
        rs_grpc_client_t *cl = gw_upstream_client(app->ups, (gw_upstream_id_t)id);

        h[id].breaker = rs_upstream_breaker_state(rs_grpc_client_upstream(cl));
        h[id].connectivity = rs_grpc_client_connectivity(cl);
        h[id].ready = h[id].breaker != RS_BREAKER_OPEN &&
                      strcmp(h[id].connectivity, "transient-failure") != 0 &&
                      strcmp(h[id].connectivity, "shutdown") != 0;
        ready = ready && h[id].ready;
    }
    return ready;
}

const char *gw_ops_status_word(struct gw_app *app, bool ready)
{
    return atomic_load(&app->draining) ? "draining" : ready ? "ok" : "unavailable";
}

void gw_ops_readyz(struct gw_app *app, h2o_mem_pool_t *pool, gw_reply_t *out)
{
    gw_upstream_health_t h[GW_UPSTREAM_COUNT];
    bool ready = gw_ops_ready(app, h);
    char body[64];
    int n = snprintf(body, sizeof body, "{\"status\":\"%s\"}", gw_ops_status_word(app, ready));

    reply_text(pool, out, ready ? 200 : 503, "application/json", body, (size_t)n);
}

void gw_ops_openapi(struct gw_app *app, h2o_mem_pool_t *pool, gw_reply_t *out)
{
    (void)app;
    (void)pool;
    out->status = 200;
    out->content_type = "application/json";
    out->body = (const char *)gw_openapi_json; /* static: outlives the pool */
    out->len = gw_openapi_json_len;
}
