/* SPDX-License-Identifier: Apache-2.0 */
/*
 * access.h - what the gateway records of each answer: the request counters
 * and latency histograms (metrics.h), and one key=value access-log line,
 * 5xx lines limited per route, status and reason (svc/core.h "Repeated
 * lines"). Used on the loop thread that answers the request.
 */
#ifndef GW_ACCESS_H
#define GW_ACCESS_H

#include "dispatch.h"
#include "routes.h"

/* Longest path an access-log line shows. */
#define GW_ACCESS_PATH_MAX 256

/* What an access-log line says about a request. */
typedef struct gw_access {
    gw_loop_t *loop;
    const gw_route_t *route; /* NULL: unmatched */
    const char *method;
    size_t method_len;
    const char *path; /* without the query */
    size_t path_len;
    uint64_t start_ns;
    const rs_grpc_result_t *res; /* upstream routes only */
    int grpc_code;               /* -1: none (success of a local route) */
    bool stale;                  /* answered from the stale cache ... */
    uint64_t age_ms;             /* ... with an answer this old */
    const char *sub;             /* the verified token's subject; NULL: anonymous */
    const char *auth_error;      /* why its token was refused (log only); NULL: it was not */
} gw_access_t;

/* The entry of a request no route has matched yet, starting now. */
gw_access_t gw_access_begin(gw_loop_t *l, h2o_req_t *req, int grpc_code);
/* Counts the answer and writes its access-log line (with the request id the
 * caller has set for this thread). Call just before sending. */
void gw_access_end(const gw_access_t *e, int status);
/* Copies a path for a log line: printable ASCII only, quotes escaped as %22
 * (cap bytes, NUL-terminated). */
void gw_access_path(const char *p, size_t len, char *out, size_t cap);

#endif
