/* SPDX-License-Identifier: Apache-2.0 */
/* upstream.c - rs_grpc clients for the upstreams, and the loop hand-off. */
#include <stdlib.h>
#include <string.h>

#include "upstream.h"

struct gw_upstreams {
    rs_grpc_client_t *cl[GW_UPSTREAM_COUNT];
    char target[GW_UPSTREAM_COUNT][SVC_CFG_STR_MAX];
    const gw_route_t *routes; /* the table's rows index the fail-fast windows */
    gw_failfast_t *ff;        /* NULL: GATEWAY_FAILFAST=off */
    uint64_t ff_max_ns; /* GATEWAY_FAILFAST_MAX_WINDOW_MS: a probe's lease without a deadline */
};

/* The method table of one upstream, from the routes that use it. */
static size_t methods_of(gw_upstream_id_t id, const gw_route_t *routes, size_t n, rs_method_t *out)
{
    size_t k = 0;

    for (size_t i = 0; i < n && k < RS_MAX_METHODS; i++) {
        bool seen = false;
        if (routes[i].rpc == NULL || routes[i].upstream != id)
            continue;
        for (size_t j = 0; j < k; j++)
            seen = seen || strcmp(out[j].path, routes[i].rpc) == 0;
        if (seen)
            continue;
        memset(&out[k], 0, sizeof out[k]);
        out[k].path = routes[i].rpc;
        out[k].idempotency = routes[i].idempotency;
        k++;
    }
    return k;
}

svc_err_t gw_upstreams_new(const gw_config_t *cfg, const gw_route_t *routes, size_t n,
                           gw_upstreams_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    gw_upstreams_t *u = calloc(1, sizeof *u);
    rs_method_t methods[RS_MAX_METHODS];
    svc_err_t err = SVC_OK;

    *out = NULL;
    if (u == NULL)
        return SVC_ENOMEM;
    snprintf(u->target[GW_UPSTREAM_CATALOG], SVC_CFG_STR_MAX, "%s", cfg->catalog_addr);
    snprintf(u->target[GW_UPSTREAM_ORDER], SVC_CFG_STR_MAX, "%s", cfg->order_addr);
    u->routes = routes;
    if (cfg->failfast) {
        gw_failfast_opts_t fo;

        gw_failfast_opts_init(&fo);
        fo.routes = routes;
        fo.n_routes = n;
        fo.max_window_ms = (uint32_t)cfg->failfast_max_window_ms;
        u->ff_max_ns = (uint64_t)fo.max_window_ms * SVC_NS_PER_MS;
        err = gw_failfast_new(&fo, &u->ff);
        if (err != SVC_OK) {
            svc_errbuf_set(errbuf, "fail-fast windows: %s", svc_strerror(err));
            free(u);
            return err;
        }
    }
    for (int id = 0; id < GW_UPSTREAM_COUNT; id++) {
        rs_grpc_opts_t o;

        rs_grpc_opts_init(&o);
        o.target = u->target[id];
        o.upstream.name = gw_upstream_name((gw_upstream_id_t)id);
        o.upstream.policy.attempt_timeout_ms = (uint32_t)cfg->attempt_timeout_ms;
        o.upstream.policy.max_attempts = (uint32_t)cfg->max_attempts;
        o.upstream.policy.backoff_base_ms = (uint32_t)cfg->backoff_base_ms;
        o.upstream.policy.backoff_cap_ms = (uint32_t)cfg->backoff_cap_ms;
        o.upstream.breaker.failures = (uint32_t)cfg->breaker_failures;
        o.upstream.breaker.cooldown_ms = (uint32_t)cfg->breaker_cooldown_ms;
        o.upstream.max_concurrent = (uint32_t)cfg->max_concurrent;
        o.upstream.methods = methods;
        o.upstream.n_methods = methods_of((gw_upstream_id_t)id, routes, n, methods);
        /* A connection per loop: loops calling at once on one connection
         * queue for its gRPC combiner (docs/bench/history.md, "A connection
         * per loop"). One breaker and budget for all of them still. */
        o.channels = cfg->threads < RS_GRPC_MAX_CHANNELS ? (int)cfg->threads : RS_GRPC_MAX_CHANNELS;
        err = rs_grpc_client_new(&o, &u->cl[id], errbuf);
        if (err != SVC_OK)
            break;
    }
    if (err != SVC_OK) {
        gw_upstreams_free(u);
        return err;
    }
    *out = u;
    return SVC_OK;
}

void gw_upstreams_free(gw_upstreams_t *u)
{
    if (u == NULL)
        return;
    for (int id = 0; id < GW_UPSTREAM_COUNT; id++)
        rs_grpc_client_free(u->cl[id]);
    gw_failfast_free(u->ff);
    free(u);
}

rs_grpc_client_t *gw_upstream_client(gw_upstreams_t *u, gw_upstream_id_t id)
{
    return u->cl[id];
}

const char *gw_upstream_target(const gw_upstreams_t *u, gw_upstream_id_t id)
{
    return u->target[id];
}

const gw_failfast_t *gw_upstream_failfast(const gw_upstreams_t *u)
{
    return u->ff;
}

/* The catalog keeps no idempotency keys: a client has to look before it
 * creates again. The order service answers a replayed key with the first
 * result (docs/order.md), so replaying is the safe way to find out. */
static const char *const unknown_outcome[GW_UPSTREAM_COUNT] = {
    [GW_UPSTREAM_CATALOG] = "the request may have been carried out",
    [GW_UPSTREAM_ORDER] = "the order may have been placed: retry with the same Idempotency-Key",
};

const char *gw_upstream_unknown_outcome(gw_upstream_id_t id)
{
    return unknown_outcome[id];
}

bool gw_upstream_unavailable(const rs_grpc_result_t *res)
{
    switch (res->reason) {
    case RS_REASON_BREAKER_OPEN:
    case RS_REASON_BULKHEAD_FULL:
        return true;
    case RS_REASON_CANCELLED:
        return false;
    default:
        break;
    }
    return res->err == SVC_EUNAVAIL || res->err == SVC_ETIMEDOUT;
}

/* Runs on the client's thread (or on the loop's, inside rs_grpc_cancel):
 * it must not block and must not touch the request, which belongs to a loop
 * thread. Everything the loop needs is in c; the loop's receiver does the
 * rest, and may free c as soon as the message is sent. */
static void on_done(void *arg, const rs_grpc_result_t *res, ProtobufCMessage *resp)
{
    gw_call_t *c = arg;

    if (c->ups->ff != NULL)
        gw_failfast_end(c->ups->ff, c->route, c->ff_ticket, res, svc_now_ns());
    c->res = *res;
    c->resp = resp;
    h2o_multithread_send_message(c->rx, &c->msg);
}

/* The route's fail-fast window: true when the call is answered at once
 * (c->res filled). A probe's lease is its deadline, or the longest window
 * when it has none: the call ends by then, or is given up. */
static bool refused_here(gw_upstreams_t *u, gw_call_t *c, uint64_t deadline_ns)
{
    uint64_t now = svc_now_ns(), lease = deadline_ns;

    if (deadline_ns == SVC_DEADLINE_NONE)
        lease = now + u->ff_max_ns;
    return gw_failfast_admit(u->ff, c->route, now, lease, &c->ff_ticket, &c->res) ==
           GW_FAILFAST_REFUSE;
}

svc_err_t gw_upstream_call(gw_upstreams_t *u, const gw_route_t *route, const ProtobufCMessage *req,
                           const rs_grpc_call_opts_t *o, gw_call_t *c)
{
    svc_err_t err;

    c->msg = (h2o_multithread_message_t){{NULL, NULL}};
    c->resp = NULL;
    c->handle = NULL;
    c->ups = u;
    c->route = (size_t)(route - u->routes);
    c->ff_ticket = 0;
    if (u->ff != NULL && refused_here(u, c, o->deadline_ns))
        return SVC_EUNAVAIL;
    err = rs_grpc_call_async(u->cl[route->upstream], route->rpc, req, route->response, o, on_done,
                             c, &c->handle, &c->res);
    if (err != SVC_OK && u->ff != NULL) /* no done will come: the probe ends here */
        gw_failfast_end(u->ff, c->route, c->ff_ticket, &c->res, svc_now_ns());
    return err;
}
