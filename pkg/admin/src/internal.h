/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h - pkg/admin's pieces shared between http.c (pure: parsing,
 * bodies, response heads) and server.c (sockets, the thread). */
#ifndef ADMIN_INTERNAL_H
#define ADMIN_INTERNAL_H

#include "admin/admin.h"

struct admin_buf {
    char *data;
    size_t len, cap, max;
    bool overflow;     /* a write went past max, or out of memory */
    bool any_origin;   /* admin_buf_allow_any_origin() */
    const char *ctype; /* admin_buf_set_content_type(); NULL: application/json */
};

void admin__buf_init(admin_buf_t *b, size_t max);
void admin__buf_dispose(admin_buf_t *b);

typedef enum { ADMIN__HEALTHZ, ADMIN__READYZ, ADMIN__METRICS, ADMIN__DEBUG } admin__route_t;

/* A parsed request: pointers into the caller's buffer, not NUL-terminated. */
typedef struct admin__req {
    admin__route_t route;
    const char *method, *path, *query, *body; /* query: after '?' (NULL: none) */
    size_t method_len, path_len, query_len, body_len;
} admin__req_t;

/* buf[len] must be '\0'. The outcome of parsing what arrived so far: 0 =
 * incomplete (read more); 200 = a complete, routable request (*req set);
 * otherwise the status to answer with (400, 404, 405, 413, 431). With debug
 * false, only a GET without a body of the three fixed paths is routable; with
 * debug true, also GET, POST or PUT of /debug or /debug/..., with a body of
 * Content-Length bytes (head and body within max). */
int admin__parse_req(const char *buf, size_t len, size_t max, bool debug, admin__req_t *req);
/* admin__parse_req without debug routes, giving only the route. */
int admin__parse(const char *buf, size_t len, size_t max, admin__route_t *route);

/* Renders the whole response (status line, headers, body) into out. */
void admin__response(admin_buf_t *out, int status, const char *ctype, const char *body,
                     size_t body_len);
/* The same with more header lines (each ending in CRLF; "" for none). */
void admin__response_with(admin_buf_t *out, int status, const char *ctype, const char *headers,
                          const char *body, size_t body_len);

#endif
