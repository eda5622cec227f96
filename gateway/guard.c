/* SPDX-License-Identifier: Apache-2.0 */
/* guard.c - a route's callers and their rate (contract in guard.h). */
#include <stdio.h>
#include <string.h>

#include "guard.h"

#define REALM "shopmicro"

static void refuse(gw_guard_verdict_t *v, int status, int code, const char *error_reason,
                   const char *message)
{
    v->status = status;
    v->grpc_code = code;
    v->error_reason = error_reason;
    v->message = message;
}

/* Step 1: the token, when there is one. False when the request is refused. */
static bool authenticate(gw_auth_loop_t *auth, const gw_guard_request_t *rq, gw_guard_verdict_t *v)
{
    const char *tok = NULL;
    size_t len = 0;
    gw_jwt_err_t e;

    if (rq->authorization == NULL)
        return true;
    e = gw_auth_bearer_token(rq->authorization, rq->authorization_len, &tok, &len);
    if (e == GW_JWT_OK)
        e = auth != NULL ? gw_auth_verify(auth, tok, len, &v->principal) : GW_JWT_UNKNOWN_KID;
    v->token = e;
    if (e == GW_JWT_OK) {
        v->authenticated = true;
        return true;
    }
    v->reason = gw_jwt_reason(e);
    if (e == GW_JWT_INTERNAL) {
        refuse(v, 500, 13, "TOKEN_CHECK_FAILED", "the token could not be checked");
        return false;
    }
    if (e == GW_JWT_MISSING) { /* another scheme: as if no token came */
        v->reason = "not a Bearer token";
        return true;
    }
    snprintf(v->challenge, sizeof v->challenge, "Bearer realm=\"" REALM "\", error=\"%s\"",
             gw_jwt_rfc6750_error(e));
    refuse(v, 401, 16, "TOKEN_INVALID", "the bearer token is not valid");
    return false;
}

/* Step 2: the route's scopes. */
static bool authorize(const gw_guard_rule_t *rule, gw_guard_verdict_t *v)
{
    char need[PR_SCOPES_TEXT_MAX];

    if (rule->scopes == 0 && (!rule->token_required || v->authenticated))
        return true;
    if (!v->authenticated) {
        snprintf(v->challenge, sizeof v->challenge, "Bearer realm=\"" REALM "\"");
        refuse(v, 401, 16, "TOKEN_MISSING", "this route needs a bearer token");
        return false;
    }
    if ((v->principal.scopes & rule->scopes) != 0)
        return true;
    pr_scopes_format(rule->scopes, need, sizeof need);
    snprintf(v->challenge, sizeof v->challenge,
             "Bearer realm=\"" REALM "\", error=\"insufficient_scope\", scope=\"%s\"", need);
    refuse(v, 403, 7, "SCOPE_MISSING", "the token lacks the scope this route needs");
    return false;
}

/* Step 3: the rate limit of the route's class for this client. */
static void limit(gw_rl_t *rl, const gw_guard_rule_t *rule, const gw_guard_request_t *rq,
                  gw_guard_verdict_t *v)
{
    char key[sizeof "sub:" + PR_SUBJECT_MAX +
             GW_RL_ADDR_KEY_MAX]; /* longer keys fold (ratelimit.h) */
    size_t n = 0;
    gw_rl_decision_t d;

    if (rl == NULL || rule->rl_class < 0)
        return;
    if (v->authenticated)
        n = (size_t)snprintf(key, sizeof key, "sub:%s", v->principal.sub);
    else if (rq->peer != NULL)
        n = gw_rl_addr_key(rq->peer, key, sizeof key);
    if (n == 0 || gw_rl_check(rl, (size_t)rule->rl_class, key, n, rq->now_ns, &d) != SVC_OK)
        return;
    if (d.limited_class) {
        gw_rl_headers_format(&d, &v->rl);
        v->has_rl = true;
    }
    if (!d.allowed) {
        v->retry_after_s = d.retry_after_s > UINT32_MAX ? UINT32_MAX : (uint32_t)d.retry_after_s;
        refuse(v, 429, 8, "RATE_LIMITED", "too many requests: retry after the time in Retry-After");
    }
}

void gw_guard_check(gw_auth_loop_t *auth, gw_rl_t *rl, const gw_guard_rule_t *rule,
                    const gw_guard_request_t *rq, gw_guard_verdict_t *v)
{
    memset(v, 0, sizeof *v);
    v->reason = "";
    v->token = GW_JWT_MISSING;
    if (authenticate(auth, rq, v) && authorize(rule, v))
        limit(rl, rule, rq, v);
}
