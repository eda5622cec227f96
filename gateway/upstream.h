/* SPDX-License-Identifier: Apache-2.0 */
/*
 * upstream.h - the gateway's gRPC upstreams (catalog, order): one guarded
 * rs_grpc client each, and the hand-off of a finished call from the
 * client's thread back to the h2o loop that owns the request.
 *
 * Each upstream's resilience method table comes from the route table: a
 * row's idempotency (RS_IDEMPOTENT for Get/List, RS_NOT_IDEMPOTENT for
 * Create) decides whether the engine may retry it.
 *
 * Every call also passes the route's fail-fast window (failfast.h; off with
 * GATEWAY_FAILFAST=off): while an upstream's refusal holds for the route,
 * gw_upstream_call answers at once, as if the upstream had refused again.
 */
#ifndef GW_UPSTREAM_H
#define GW_UPSTREAM_H

#include <h2o.h>

#include "config.h"
#include "failfast.h"
#include "routes.h"
#include "rs/grpc.h"

typedef struct gw_upstreams gw_upstreams_t;

/* Creates every upstream's client (channel, breaker, budget, thread).
 * *out owned by caller (gw_upstreams_free). SVC_EINVAL/SVC_ENOMEM. */
svc_err_t gw_upstreams_new(const gw_config_t *cfg, const gw_route_t *routes, size_t n,
                           gw_upstreams_t **out, char errbuf[static SVC_ERRBUF_LEN]);
/* Every call must have been delivered. NULL-safe. */
void gw_upstreams_free(gw_upstreams_t *u);

/* Borrowed; valid until gw_upstreams_free. */
rs_grpc_client_t *gw_upstream_client(gw_upstreams_t *u, gw_upstream_id_t id);
const char *gw_upstream_target(const gw_upstreams_t *u, gw_upstream_id_t id);
/* The fail-fast windows of the routes, for /metrics; NULL with
 * GATEWAY_FAILFAST=off. Borrowed; valid until gw_upstreams_free. */
const gw_failfast_t *gw_upstream_failfast(const gw_upstreams_t *u);

/*
 * What a client must know when a non-idempotent call to upstream id was
 * sent and ended without the upstream's verdict (connection reset,
 * timeout, cancelled): it may have been carried out. The order service
 * keeps idempotency keys, so there the note says how to find out. Never
 * NULL; static.
 */
const char *gw_upstream_unknown_outcome(gw_upstream_id_t id);

/*
 * Whether a failed call failed because its upstream is unavailable rather
 * than because of what was asked - the failures a stale answer may stand in
 * for (docs/gateway.md, "Stale reads"):
 *   - refused before it was sent: breaker open, bulkhead full;
 *   - UNAVAILABLE or DEADLINE_EXCEEDED after its attempts (attempts used
 *     up, retry budget out, no time for another, not retryable), the
 *     upstream's own UNAVAILABLE (its database down) included.
 * Never: a verdict of the upstream (NOT_FOUND, INVALID_ARGUMENT, ...), a
 * shed or quota answer (RESOURCE_EXHAUSTED: 429 tells the client to slow
 * down), a call the caller or the drain cancelled, our own out-of-memory.
 * Pure.
 */
bool gw_upstream_unavailable(const rs_grpc_result_t *res);

/*
 * One call in flight. Embed it in the request's state; fill rx before
 * gw_upstream_call. When the call is over, on the client's thread, res and
 * resp are filled and msg is sent to rx: the receiver (on its loop) then
 * owns resp (protobuf_c_message_free_unpacked(resp, NULL)) and must give
 * handle back with rs_grpc_release() unless it already cancelled it.
 */
typedef struct gw_call {
    h2o_multithread_message_t msg; /* link: delivery to rx */
    h2o_multithread_receiver_t *rx;
    rs_grpc_async_t *handle; /* the caller's reference; NULL once given back */
    rs_grpc_result_t res;
    ProtobufCMessage *resp; /* SVC_OK only */
    /* private: for the fail-fast window, set by gw_upstream_call */
    gw_upstreams_t *ups;
    size_t route;       /* index in the route table */
    uint64_t ff_ticket; /* gw_failfast_admit's */
} gw_call_t;

/*
 * Starts route->rpc on its upstream with req (borrowed: packed before this
 * returns) and options o (metadata copied). SVC_OK: c->msg will be sent to
 * c->rx exactly once. Anything else (the route's fail-fast window, breaker
 * open, bulkhead full, deadline already too short, out of memory): nothing
 * will be sent, c->res says why (res.retry_after_ms for Retry-After). route
 * must be a row of the table gw_upstreams_new was given. Any thread; never
 * blocks.
 */
svc_err_t gw_upstream_call(gw_upstreams_t *u, const gw_route_t *route, const ProtobufCMessage *req,
                           const rs_grpc_call_opts_t *o, gw_call_t *c);

#endif
