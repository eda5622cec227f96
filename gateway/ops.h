/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ops.h - the operations endpoints of the public port, as local routes of
 * the route table, and the readiness both ports report:
 *
 *   /healthz  200 {"status":"ok"} while the process serves HTTP.
 *   /readyz   {"status":"ok"} 200, or {"status":"unavailable"} /
 *             {"status":"draining"} 503: a breaker is open, a channel is in
 *             transient failure, or the gateway is draining. Nothing more:
 *             the upstreams' names, targets and states are on the admin
 *             port's /readyz (adminport.h).
 *   /openapi.json  200, the OpenAPI 3.1 document of the public port, made
 *             at build time from the route table and the proto descriptors
 *             (gateway/tools/openapi_gen.c) and embedded as gw_openapi_json.
 *
 * The routes run on a loop thread and only read atomics: none blocks.
 */
#ifndef GW_OPS_H
#define GW_OPS_H

#include <stdbool.h>

#include "routes.h"
#include "rs/grpc.h"

void gw_ops_healthz(struct gw_app *app, struct st_h2o_mem_pool_t *pool, gw_reply_t *out);
void gw_ops_readyz(struct gw_app *app, struct st_h2o_mem_pool_t *pool, gw_reply_t *out);
void gw_ops_openapi(struct gw_app *app, struct st_h2o_mem_pool_t *pool, gw_reply_t *out);

/* The body of /healthz and /readyz as a JSON Schema (the route table's
 * local_schema). */
#define GW_OPS_STATUS_SCHEMA                                                                       \
    "{\"type\":\"object\",\"required\":[\"status\"],\"properties\":{\"status\":{\"type\":"         \
    "\"string\",\"enum\":[\"ok\",\"unavailable\",\"draining\"]}}}"

/* The document /openapi.json serves (generated, embedded at build time). */
extern const unsigned char gw_openapi_json[];
extern const size_t gw_openapi_json_len;

/* One upstream as readiness sees it. connectivity is static. */
typedef struct gw_upstream_health {
    rs_breaker_state_t breaker;
    const char *connectivity; /* rs_grpc_client_connectivity() */
    bool ready;               /* breaker not open, channel not failing */
} gw_upstream_health_t;

/* Fills h[GW_UPSTREAM_COUNT]; true when the gateway is ready (every upstream
 * is and it is not draining). Any thread. */
bool gw_ops_ready(struct gw_app *app, gw_upstream_health_t *h);
/* "ok", "unavailable" or "draining" for a gw_ops_ready() verdict. */
const char *gw_ops_status_word(struct gw_app *app, bool ready);

#endif
