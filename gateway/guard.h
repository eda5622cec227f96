/* SPDX-License-Identifier: Apache-2.0 */
/*
 * guard.h - who may call a route, and how often: what a request must pass
 * before the gateway decodes or calls anything (docs/gateway.md, "Security").
 *
 *   1. The bearer token (RFC 6750), when the request has one or the route
 *      needs one: verified by auth.h. A token that does not verify is
 *      refused on every route, public ones included (a client with a broken
 *      token should learn it at once): 401 with
 *      WWW-Authenticate: Bearer error="invalid_token". A route that needs a
 *      scope and gets no token: 401 with a bare Bearer challenge.
 *   2. The scopes: a route names those it accepts (any one will do; 0: a
 *      public route, unless it needs a token of any scope); a verified token
 *      without one is 403 with error="insufficient_scope" and the scope it
 *      needs.
 *   3. The rate limit (ratelimit.h) of the route's class, per client: the
 *      token's subject, or for an anonymous request its address. Over it:
 *      429 with Retry-After; every limited answer carries RateLimit-Policy
 *      and RateLimit.
 *
 * What a refusal says to the client is fixed text; why the token was
 * refused (expired, wrong audience, …) goes only to the log line. Loop
 * threads: gw_guard_check uses that loop's auth cache and the shared
 * limiter; it never blocks.
 */
#ifndef GW_GUARD_H
#define GW_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include "auth.h"
#include "ratelimit.h"

/* What a route asks of its callers (a row of routes.h). */
typedef struct gw_guard_rule {
    pr_scopes_t scopes;  /* accepted scopes, any one; 0: any caller (see token_required) */
    int rl_class;        /* ratelimit.h class index; -1: not limited */
    bool token_required; /* scopes 0 but a valid token of any scope is needed (401 without) */
} gw_guard_rule_t;

/* The request's side. */
typedef struct gw_guard_request {
    const char *authorization; /* the Authorization header's value; NULL: none */
    size_t authorization_len;
    const struct sockaddr *peer; /* NULL: unknown (no address key: not limited) */
    uint64_t now_ns;             /* monotonic, for the limiter */
} gw_guard_request_t;

typedef struct gw_guard_verdict {
    int status;               /* 0: admitted; else 401, 403, 429 or 500 */
    int grpc_code;            /* the google.rpc.Status code of a refusal: 16, 7, 8, 13 */
    const char *message;      /* the client's text of a refusal; static */
    const char *error_reason; /* its ErrorInfo.reason (status.h): TOKEN_INVALID, TOKEN_MISSING,
                                 SCOPE_MISSING, RATE_LIMITED, TOKEN_CHECK_FAILED; static */
    char challenge[160];      /* WWW-Authenticate of a 401 or 403; "" none */
    const char *reason;       /* for the log: why a token was refused; static, "" none */
    gw_jwt_err_t token; /* the token's check: GW_JWT_MISSING when none (or another scheme) came */
    bool authenticated; /* principal is set */
    gw_principal_t principal;
    bool has_rl; /* rl holds the RateLimit headers to send */
    gw_rl_headers_t rl;
    uint32_t retry_after_s; /* a 429's Retry-After, >= 1; else 0 */
} gw_guard_verdict_t;

/* auth: this loop's (NULL: no token check configured, every token refused
 * and every scoped route 401). rl: NULL when rate limits are off. */
void gw_guard_check(gw_auth_loop_t *auth, gw_rl_t *rl, const gw_guard_rule_t *rule,
                    const gw_guard_request_t *rq, gw_guard_verdict_t *v);

#endif
