/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes.h - THE route table of the gateway and its matcher.
 *
 * One row per REST route. A gRPC row names the upstream, the full method
 * path, the request and response messages, how the request is built (body
 * "*" or path + query) and whether the method may be retried; that row is
 * all it takes to add a route (the upstream's resilience method table is
 * derived from these rows). A local row (the operations endpoints) names a
 * function instead.
 *
 * Path templates follow google.api.http: literal segments and variables
 * "{field}" (same as "{field=*}"), which match exactly one segment, an empty
 * one included: "/v1/products/" matches "/v1/products/{id}" with id "", as in
 * grpc-gateway. Nothing here touches h2o or the network; the matcher is a
 * pure function.
 */
#ifndef GW_ROUTES_H
#define GW_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "principal/principal.h"
#include "rs/resilience.h"
#include "svc/core.h"

typedef enum gw_upstream_id {
    GW_UPSTREAM_CATALOG,
    GW_UPSTREAM_ORDER,
    GW_UPSTREAM_COUNT
} gw_upstream_id_t;

typedef enum gw_body {
    GW_BODY_NONE, /* request from path variables + query string (GET) */
    GW_BODY_ALL,  /* body: "*": the JSON body is the request; the query is ignored */
} gw_body_t;

/*
 * Whether the route's last answer may stand in for one the upstream cannot
 * give (docs/gateway.md, "Stale reads"). GW_STALE_OK only for a GET that is
 * RS_IDEMPOTENT with GW_BODY_NONE (gw_routes_validate checks), and only
 * where that is honest: the answer must not depend on who asks (the cache
 * is shared by every client and keyed by the request alone, not by its
 * Authorization), and an answer some seconds old must still be useful.
 * The catalog's reads qualify; an order's status does not (a client polling
 * it would see PENDING after it was confirmed).
 */
typedef enum gw_stale {
    GW_STALE_NEVER, /* a failure is answered as such */
    GW_STALE_OK,    /* an availability failure may be answered from the stale cache */
} gw_stale_t;

/* What a local route answers. body is borrowed and must live until the
 * request's pool is cleared (allocate it there). */
typedef struct gw_reply {
    int status;
    const char *content_type;
    const char *body;
    size_t len;
} gw_reply_t;

struct gw_app;
struct st_h2o_mem_pool_t;
/* A local route: runs on the loop thread, must not block. */
typedef void (*gw_local_fn)(struct gw_app *app, struct st_h2o_mem_pool_t *pool, gw_reply_t *out);

typedef struct gw_route {
    const char *method;  /* "GET", "POST": compared exactly, like Go's mux */
    const char *pattern; /* "/v1/products/{id}"; also the metric label */
    /* gRPC routes */
    gw_upstream_id_t upstream;
    const char *rpc; /* "/shopmicro.catalog.v1.CatalogService/GetProduct" */
    const ProtobufCMessageDescriptor *request, *response;
    gw_body_t body;
    rs_idempotency_t idempotency; /* RS_IDEMPOTENT (may be retried) / RS_NOT_IDEMPOTENT */
    gw_stale_t stale;
    /* who may call it and how often (guard.h; docs/gateway.md, "Security") */
    pr_scopes_t scopes;     /* a token with any one of these; 0: public (no token needed) */
    const char *rate_class; /* its GATEWAY_RATE_LIMITS class; NULL: not limited */
    /* local routes (rpc == NULL) */
    gw_local_fn local;
    /* the JSON Schema of a local route's 200 body, for the OpenAPI document
     * (gateway/tools/openapi_gen.c); NULL: any JSON */
    const char *local_schema;
} gw_route_t;

/* The table (routes.c). Rows registered later win when patterns overlap,
 * as in grpc-gateway. */
extern const gw_route_t gw_routes[];
extern const size_t gw_n_routes;

#define GW_MAX_PATH_VARS  4
#define GW_MAX_FIELD_PATH 127

/* One captured variable. field points into the route's pattern, value into
 * the request path (still percent-encoded). */
typedef struct gw_path_var {
    const char *field;
    size_t field_len;
    const char *value;
    size_t value_len;
} gw_path_var_t;

/* The methods a row may have (RFC 9110 §9), in the order an Allow header
 * lists them; gw_routes_validate refuses any other. */
#define GW_METHODS(XX) XX(GET) XX(HEAD) XX(POST) XX(PUT) XX(PATCH) XX(DELETE) XX(OPTIONS)
enum {
#define XX(m) GW_METHOD_BIT_##m##_SHIFT,
    GW_METHODS(XX)
#undef XX
};
#define XX(m) GW_METHOD_BIT_##m = 1u << GW_METHOD_BIT_##m##_SHIFT,
enum { GW_METHODS(XX) };
#undef XX

typedef struct gw_match {
    const gw_route_t *route; /* GW_MATCH_OK only */
    size_t n_vars;
    gw_path_var_t vars[GW_MAX_PATH_VARS];
    unsigned allow; /* GW_MATCH_WRONG_METHOD: GW_METHOD_BIT_* of every row with the path */
} gw_match_t;

typedef enum gw_match_result {
    GW_MATCH_OK,           /* m->route and m->vars are set */
    GW_MATCH_NOT_FOUND,    /* no route has this path: 404 code 5 "Not Found" */
    GW_MATCH_WRONG_METHOD, /* a route has the path, not the method: 405 code 12, m->allow set */
    GW_MATCH_BAD_PATH,     /* the path does not start with '/': 400 code 3 */
} gw_match_result_t;

/*
 * Finds the route for method + path (path without the query string; both
 * borrowed, not NUL-terminated). Rows are tried last to first. Pure and
 * thread-safe; m is filled on GW_MATCH_OK (route, vars) and on
 * GW_MATCH_WRONG_METHOD (allow) only.
 */
gw_match_result_t gw_route_match(const gw_route_t *routes, size_t n, const char *method,
                                 size_t method_len, const char *path, size_t path_len,
                                 gw_match_t *m);

/*
 * Checks a table once at start-up: templates well formed, at most
 * GW_MAX_PATH_VARS variables each naming a field of the request message,
 * gRPC rows complete (upstream, rpc, messages, body kind, idempotency
 * declared), GW_STALE_OK only on GET rows that are idempotent and have no
 * body and are public (the stale cache is shared by every caller), local
 * rows with a function, public and not limited (probes carry no token), methods of GW_METHODS only, no two rows
 * with the same method and template. SVC_EINVAL with the row and the reason in errbuf.
 */
svc_err_t gw_routes_validate(const gw_route_t *routes, size_t n,
                             char errbuf[static SVC_ERRBUF_LEN]);

/* The methods of allow (GW_METHOD_BIT_*) as an Allow header's value,
 * "GET, POST", into buf like snprintf (cap bytes, NUL-terminated when cap >
 * 0); returns the length it needs. Pure. */
size_t gw_route_allow_text(unsigned allow, char *buf, size_t cap);

/* "catalog", "order". Never NULL. */
const char *gw_upstream_name(gw_upstream_id_t id);

/* Whether the upstream reads the caller (principal.h's metadata) for a rule
 * of its own: order does (a customer's own orders); the catalog has no such
 * rule and is not told who asks. */
bool gw_upstream_reads_caller(gw_upstream_id_t id);

/* Whether the upstream keeps the Idempotency-Key of its non-idempotent
 * calls (a replay returns the first answer; the key reused with another
 * request is ALREADY_EXISTS, HTTP 409): order does (docs/order.md); the
 * catalog keeps no keys. The OpenAPI document declares the header and the
 * 409 from this. */
bool gw_upstream_keeps_keys(gw_upstream_id_t id);

#endif
