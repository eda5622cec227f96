/* SPDX-License-Identifier: Apache-2.0 */
/* admit.c - a matched request's token, scopes and rate (see admit.h). */
#include <string.h>

#include "admit.h"
#include "door.h"
#include "headers.h"
#include "http.h"

static void add_ratelimit(h2o_req_t *req, const gw_rl_headers_t *rl)
{
    gw_http_add_header(req, "ratelimit-policy", "RateLimit-Policy", rl->policy, strlen(rl->policy));
    gw_http_add_header(req, "ratelimit", "RateLimit", rl->ratelimit, strlen(rl->ratelimit));
}

static void describe(gw_guard_request_t *rq, h2o_req_t *req, struct sockaddr_storage *ss)
{
    const h2o_header_t *h = gw_find_header(req, H2O_STRLIT("authorization"));

    memset(rq, 0, sizeof *rq);
    if (h != NULL) {
        rq->authorization = h->value.base;
        rq->authorization_len = h->value.len;
    }
    if (req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)ss) > 0)
        rq->peer = (const struct sockaddr *)ss;
    rq->now_ns = svc_now_ns();
}

bool gw_admit(gw_loop_t *l, h2o_req_t *req, gw_access_t *e, gw_principal_t *who,
              bool *authenticated)
{
    struct sockaddr_storage ss;
    gw_guard_request_t rq;
    gw_guard_verdict_t v;
    gw_access_t refused;

    *authenticated = false;
    describe(&rq, req, &ss);
    gw_door_check(l->app->door, l->auth, (size_t)(e->route - gw_routes), &rq, &v);
    if (v.has_rl)
        add_ratelimit(req, &v.rl);
    if (v.reason[0] != '\0')
        e->auth_error = v.reason;
    if (v.authenticated) {
        *who = v.principal;
        *authenticated = true;
        e->sub = h2o_strdup(&req->pool, v.principal.sub, SIZE_MAX).base;
    }
    if (v.status == 0)
        return true;
    if (v.challenge[0] != '\0')
        gw_http_add_header(req, "www-authenticate", "WWW-Authenticate", v.challenge,
                           strlen(v.challenge));
    refused = *e;
    refused.grpc_code = v.grpc_code;
    gw_access_end(&refused, v.status);
    gw_http_send_error(req, &(gw_error_t){.status = v.status,
                                          .code = v.grpc_code,
                                          .message = v.message,
                                          .reason = v.error_reason,
                                          .retry_after_s = v.retry_after_s});
    return false;
}
