/* SPDX-License-Identifier: Apache-2.0 */
/* adminport.c - the gateway's admin listener (see adminport.h). */
#include <stdlib.h>
#include <string.h>

#include "adminport.h"
#include "door.h"
#include "ops.h"
#include "resilience.h"

static svc_err_t failfast_render(const void *arg, char *buf, size_t cap, size_t *len)
{
    return gw_failfast_render(arg, buf, cap, len);
}

static svc_err_t ratelimit_render(const void *arg, char *buf, size_t cap, size_t *len)
{
    return gw_rl_render(arg, buf, cap, len);
}

typedef struct ups_list {
    rs_upstream_t *ups[GW_UPSTREAM_COUNT];
} ups_list_t;

static svc_err_t upstreams_render(const void *arg, char *buf, size_t cap, size_t *len)
{
    return rs_metrics_render(((const ups_list_t *)arg)->ups, GW_UPSTREAM_COUNT, buf, cap, len);
}

static void upstream_list(gw_app_t *app, ups_list_t *l)
{
    for (int id = 0; id < GW_UPSTREAM_COUNT; id++)
        l->ups[id] = rs_grpc_client_upstream(gw_upstream_client(app->ups, (gw_upstream_id_t)id));
}

static void admin_metrics(void *ctx, admin_buf_t *out)
{
    gw_app_t *app = ctx;
    const gw_failfast_t *ff = gw_upstream_failfast(app->ups);
    gw_cache_stats_t cache;
    gw_conn_stats_t conns = {atomic_load_explicit(&app->n_conns, memory_order_relaxed),
                             (size_t)app->cfg->max_connections};
    char *text = NULL;
    size_t len = 0;
    ups_list_t l;

    if (app->stale != NULL)
        gw_cache_stats(app->stale, &cache);
    if (gw_metrics_render(app->metrics, app->stale != NULL ? &cache : NULL, &conns, &text, &len) ==
        SVC_OK)
        admin_buf_printf(out, "%.*s", (int)len, text);
    else
        admin_buf_printf(out, "# cannot render the gateway's HTTP metrics: out of memory\n");
    free(text);
    if (ff != NULL)
        admin_buf_render(out, failfast_render, ff);
    admin_buf_render(out, gw_door_render, app->door);
    if (gw_door_ratelimit(app->door) != NULL)
        admin_buf_render(out, ratelimit_render, gw_door_ratelimit(app->door));
    upstream_list(app, &l);
    admin_buf_render(out, upstreams_render, &l);
}

static bool admin_readyz(void *ctx, admin_buf_t *out)
{
    gw_app_t *app = ctx;
    gw_upstream_health_t h[GW_UPSTREAM_COUNT];
    bool ready = gw_ops_ready(app, h);

    admin_buf_printf(out, "{\"status\":\"%s\",\"upstreams\":[", gw_ops_status_word(app, ready));
    for (int id = 0; id < GW_UPSTREAM_COUNT; id++) {
        admin_buf_printf(out, "%s{\"name\":\"%s\",\"target\":", id > 0 ? "," : "",
                         gw_upstream_name((gw_upstream_id_t)id));
        admin_buf_json_str(out, gw_upstream_target(app->ups, (gw_upstream_id_t)id));
        admin_buf_printf(out, ",\"breaker\":\"%s\",\"connectivity\":\"%s\",\"ready\":%s}",
                         rs_breaker_state_name(h[id].breaker), h[id].connectivity,
                         h[id].ready ? "true" : "false");
    }
    admin_buf_printf(out, "]}\n");
    return ready;
}

static int admin_debug(void *ctx, const admin_request_t *req, admin_buf_t *out)
{
    gw_app_t *app = ctx;
    bool page = strcmp(req->path, "/debug/resilience") == 0;
    bool feed = strcmp(req->path, GW_RESILIENCE_FEED) == 0;

    if (!page && !feed) {
        admin_buf_printf(out, "{\"error\":\"not found: the debug pages are /debug/resilience "
                              "and " GW_RESILIENCE_FEED "\"}\n");
        return 404;
    }
    if (strcmp(req->method, "GET") != 0) {
        admin_buf_printf(out, "{\"error\":\"method not allowed: GET only\"}\n");
        return 405;
    }
    if (page) {
        gw_resilience_page_write(out);
        return 200;
    }
    {
        ups_list_t l;

        upstream_list(app, &l);
        return gw_resilience_feed_write(app->cfg->resilience_peers, l.ups, out) ? 200 : 500;
    }
}

svc_err_t gw_admin_start(gw_app_t *app, admin_server_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    admin_opts_t o;

    admin_opts_init(&o);
    o.listen = app->cfg->admin_listen;
    o.metrics = admin_metrics;
    o.ready = admin_readyz;
    o.ctx = app;
    o.debug = admin_debug;
    o.debug_ctx = app;
    o.log_module = "gateway.admin";
    return admin_server_new(&o, out, errbuf);
}
