/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch.h - the one generic request path of the gateway, written once for
 * every route of the table:
 *
 *   request id -> framing (400, closes) -> CORS preflight ->
 *   route match (404 / 405 / 400) -> admit.h (401 / 403 / 429) ->
 *   Grpc-Timeout deadline (400, 504 when already expired) ->
 *   metadata (Idempotency-Key 400, size 431) ->
 *   request message (bind.h) -> rs_grpc_call_async -> ... ->
 *   (completion handed back to this loop) -> JSON or error body ->
 *   one access-log line and the metrics.
 *
 * Stale reads (docs/gateway.md): on a GW_STALE_OK route a 200's JSON is
 * stored in the app's stale cache under the request's key, and a failure
 * that gw_upstream_unavailable() calls an outage is answered with the
 * stored body instead, if one at most GATEWAY_STALE_MAX_AGE_MS old is
 * there: 200, the same body, and the stale headers.
 *
 * Threads: everything here runs on the h2o loop thread that owns the
 * request, except the upstream's done callback (upstream.c), which only
 * posts a message to the loop's receiver. A client that goes away cancels
 * its upstream call: either h2o disposes the request (the pool guard), or
 * the loop's 100 ms check finds the connection closed by the peer (h2o
 * 2.2.5 stops reading a connection while its request is processed, so it
 * would otherwise notice only when the answer is written).
 */
#ifndef GW_DISPATCH_H
#define GW_DISPATCH_H

#include <stdatomic.h>
#include <stdbool.h>

#include <h2o.h>

#include "auth.h"
#include "config.h"
#include "metrics.h"
#include "stale_cache.h"
#include "upstream.h"

/* What every loop shares. Read-only once serving, except `draining` and
 * `n_conns` (and what the stale cache and the metrics guard themselves). */
typedef struct gw_app {
    const gw_config_t *cfg;
    gw_upstreams_t *ups;
    gw_metrics_t *metrics;
    gw_cache_t *stale;     /* NULL: GATEWAY_STALE_READS=off; shared by the loops, thread-safe */
    struct gw_door *door;  /* door.h: the token check and the rate limits */
    atomic_bool draining;  /* shutdown begun: /readyz answers 503 */
    atomic_size_t n_conns; /* client connections open, all loops (server.c counts them) */
} gw_app_t;

/* One event loop's state; server.c embeds it. Loop thread only. */
typedef struct gw_loop {
    h2o_context_t ctx; /* first: a request finds its loop through req->conn->ctx */
    gw_app_t *app;
    h2o_multithread_receiver_t done_rx; /* upstream completions (gw_call_t.msg) */
    h2o_linklist_t pending;             /* calls in flight, oldest first */
    size_t n_pending;
    h2o_timeout_entry_t peek; /* client-disconnect check while calls are pending */
    bool stopping;            /* answers now carry Connection: close */
    uint64_t rng;             /* request ids */
    unsigned lane;            /* its upstream channel: the loop's index */
    gw_auth_loop_t *auth;     /* its token cache (door.h); NULL: no key set */
} gw_loop_t;

/* The loop a request arrived on: h2o_context_t is gw_loop_t's first member. */
static inline gw_loop_t *gw_loop_of(h2o_req_t *req)
{
    return (gw_loop_t *)req->conn->ctx;
}

/* Registers the dispatcher for every path of host, and the filter that
 * turns h2o's own error answers (413 body too large, 400 bad chunked
 * encoding) into JSON error bodies (errfilter.h). app is borrowed. */
void gw_dispatch_register(h2o_hostconf_t *host, gw_app_t *app);

/* The request's id: the client's X-Request-Id (sanitised), or a new random
 * one; also set as the response's X-Request-Id. In the request's pool. */
const char *gw_request_id(gw_loop_t *l, h2o_req_t *req);

/* After h2o_context_init(&l->ctx, ...), on the loop's thread. */
void gw_loop_dispatch_init(gw_loop_t *l, gw_app_t *app);
/* Before h2o_context_dispose; no call may be pending. */
void gw_loop_dispatch_dispose(gw_loop_t *l);

/* Shutdown drain timed out: cancels every call still in flight; each is
 * answered 503 as its cancellation completes. Returns how many. */
size_t gw_loop_cancel_pending(gw_loop_t *l);

#endif
