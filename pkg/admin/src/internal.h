/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h - pkg/admin's pieces shared between http.c (pure: parsing,
 * bodies, response heads) and server.c (sockets, the thread). */
#ifndef ADMIN_INTERNAL_H
#define ADMIN_INTERNAL_H

#include "admin/admin.h"

struct admin_buf {
    char *data;
    size_t len, cap, max;
    bool overflow; /* a write went past max, or out of memory */
};

void admin__buf_init(admin_buf_t *b, size_t max);
void admin__buf_dispose(admin_buf_t *b);

typedef enum { ADMIN__HEALTHZ, ADMIN__READYZ, ADMIN__METRICS } admin__route_t;

/* buf[len] must be '\0'. The outcome of parsing what arrived so far: 0 = incomplete (read more);
 * 200 = a complete, routable GET (*route set); otherwise the status to
 * answer with (400, 404, 405, 413, 431). */
int admin__parse(const char *buf, size_t len, size_t max, admin__route_t *route);

/* Renders the whole response (status line, headers, body) into out. */
void admin__response(admin_buf_t *out, int status, const char *ctype, const char *body,
                     size_t body_len);

#endif
