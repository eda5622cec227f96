/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_guard.c - what a request must pass before the gateway calls anything
 * (gateway/guard.h): the token, the route's scopes, the rate limit; on keys
 * made here, a fake wall clock and a time passed to the limiter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "guard.h"
#include "support/group.h"
#include "jwt_keys.h"

static struct {
    char dir[64], path[128];
    EVP_PKEY *key, *other;
    gw_auth_t *a;
    gw_auth_loop_t *l;
    gw_rl_t *rl;
    struct sockaddr_in peer;
} fx;

static int setup(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_auth_opts_t o;
    gw_rl_opts_t ro;
    gw_rl_spec_t spec;
    char *json;

    memset(&fx, 0, sizeof fx);
    snprintf(fx.dir, sizeof fx.dir, "/tmp/test_guard.XXXXXX");
    assert_non_null(mkdtemp(fx.dir));
    snprintf(fx.path, sizeof fx.path, "%s/jwks.json", fx.dir);
    fx.key = tk_ec("P-256");
    fx.other = tk_ec("P-256");
    json = tk_jwks(tk_jwk(fx.key, "k1", GW_JWS_ES256), NULL);
    tk_write_file(fx.path, json);
    free(json);
    gw_auth_opts_init(&o);
    o.jwks_file = fx.path;
    o.issuer = TK_ISS;
    o.audience = TK_AUD;
    o.wall_clock = tk_clock();
    tk_clock_set(TK_NOW);
    if (gw_auth_new(&o, &fx.a, errbuf) != SVC_OK)
        fail_msg("gw_auth_new: %s", errbuf);
    assert_int_equal(gw_auth_loop_new(fx.a, &fx.l), SVC_OK);
    assert_int_equal(gw_rl_spec_parse("read=1/s,burst=2", &spec, errbuf), SVC_OK);
    gw_rl_opts_init(&ro);
    ro.spec = &spec;
    ro.capacity = 64;
    assert_int_equal(gw_rl_new(&ro, &fx.rl), SVC_OK);
    fx.peer.sin_family = AF_INET;
    fx.peer.sin_addr.s_addr = htonl(0x7f000001);
    (void)state;
    return 0;
}

static int teardown(void **state)
{
    gw_rl_free(fx.rl);
    gw_auth_loop_free(fx.l);
    gw_auth_free(fx.a);
    EVP_PKEY_free(fx.key);
    EVP_PKEY_free(fx.other);
    unlink(fx.path);
    rmdir(fx.dir);
    (void)state;
    return 0;
}

/* Checks a request with Authorization `authz` (NULL: none) against rule. */
static void check(const char *authz, pr_scopes_t scopes, int rl_class, uint64_t now_ns,
                  gw_guard_verdict_t *v)
{
    gw_guard_rule_t rule = {scopes, rl_class, false};
    gw_guard_request_t rq = {authz, authz != NULL ? strlen(authz) : 0,
                             (const struct sockaddr *)&fx.peer, now_ns};

    gw_guard_check(fx.l, fx.rl, &rule, &rq, v);
}

/* "Bearer <a token of key for sub c1 with the claims in extra>"; caller frees. */
static char *bearer(EVP_PKEY *key, const char *extra)
{
    char *tok = tk_claims(key, GW_JWS_ES256, "k1", extra);
    size_t n = strlen(tok) + 8;
    char *h = malloc(n);

    assert_non_null(h);
    snprintf(h, n, "Bearer %s", tok);
    free(tok);
    return h;
}

static void public_route_takes_anonymous_and_valid_tokens(void **state)
{
    char *ok = bearer(fx.key, "{\"scope\":\"orders:read\"}");
    gw_guard_verdict_t v;

    check(NULL, 0, -1, 0, &v);
    assert_int_equal(v.status, 0);
    assert_false(v.authenticated);
    check(ok, 0, -1, 0, &v);
    assert_int_equal(v.status, 0);
    assert_true(v.authenticated);
    assert_string_equal(v.principal.sub, "c1");
    assert_int_equal(v.principal.scopes, PR_SCOPE_ORDERS_READ);
    /* another scheme is no token at all */
    check("Basic YTpi", 0, -1, 0, &v);
    assert_int_equal(v.status, 0);
    assert_false(v.authenticated);
    free(ok);
    (void)state;
}

/* GATEWAY_PUBLIC_READS=off: a route of no scope takes any valid token, and
 * no request without one. */
static void token_required_takes_any_valid_token(void **state)
{
    char *ok = bearer(fx.key, "{\"scope\":\"\"}");
    gw_guard_rule_t rule = {0, -1, true};
    gw_guard_request_t rq = {NULL, 0, (const struct sockaddr *)&fx.peer, 0};
    gw_guard_verdict_t v;

    gw_guard_check(fx.l, fx.rl, &rule, &rq, &v);
    assert_int_equal(v.status, 401);
    assert_string_equal(v.challenge, "Bearer realm=\"shopmicro\"");
    rq.authorization = ok;
    rq.authorization_len = strlen(ok);
    gw_guard_check(fx.l, fx.rl, &rule, &rq, &v);
    assert_int_equal(v.status, 0);
    assert_true(v.authenticated);
    assert_int_equal(v.principal.scopes, 0);
    free(ok);
    (void)state;
}

/* A token that does not verify is refused on a public route too. */
static void invalid_tokens_are_401_invalid_token_everywhere(void **state)
{
    char *forged = bearer(fx.other, NULL);
    char *expired = bearer(fx.key, "{\"exp\":1700000000}");
    char *aud = bearer(fx.key, "{\"aud\":\"someone-else\"}");
    const char *const bad[] = {forged, expired, aud, "Bearer ", "Bearer not.a.token"};
    gw_guard_verdict_t v;

    for (size_t i = 0; i < SVC_COUNTOF(bad); i++) {
        for (pr_scopes_t need = 0; need <= PR_SCOPE_ORDERS_WRITE; need += PR_SCOPE_ORDERS_WRITE) {
            check(bad[i], need, -1, 0, &v);
            if (v.status != 401 || v.grpc_code != 16)
                fail_msg("token %zu, scopes %u: status %d", i, need, v.status);
            assert_string_equal(v.challenge, "Bearer realm=\"shopmicro\", error=\"invalid_token\"");
            assert_string_equal(v.message, "the bearer token is not valid");
            assert_true(v.reason[0] != '\0');
        }
    }
    check(expired, 0, -1, 0, &v);
    assert_string_equal(v.reason, "expired");
    free(forged);
    free(expired);
    free(aud);
    (void)state;
}

static void scoped_route_needs_a_token_with_one_of_its_scopes(void **state)
{
    char *reader = bearer(fx.key, "{\"scope\":\"orders:read\"}");
    char *admin = bearer(fx.key, "{\"scope\":\"orders:admin openid\"}");
    pr_scopes_t get_order = PR_SCOPE_ORDERS_READ | PR_SCOPE_ORDERS_ADMIN;
    gw_guard_verdict_t v;

    check(NULL, PR_SCOPE_ORDERS_WRITE, -1, 0, &v);
    assert_int_equal(v.status, 401);
    assert_string_equal(v.challenge, "Bearer realm=\"shopmicro\"");
    check(reader, PR_SCOPE_ORDERS_WRITE, -1, 0, &v);
    assert_int_equal(v.status, 403);
    assert_int_equal(v.grpc_code, 7);
    assert_string_equal(v.challenge, "Bearer realm=\"shopmicro\", error=\"insufficient_scope\", "
                                     "scope=\"orders:write\"");
    check(reader, get_order, -1, 0, &v);
    assert_int_equal(v.status, 0);
    check(admin, get_order, -1, 0, &v);
    assert_int_equal(v.status, 0);
    free(reader);
    free(admin);
    (void)state;
}

/* Burst 2, 1/s: the third request in the same instant is 429; the limit
 * is per client: the token's subject, else the address. */
static void rate_limit_per_subject_or_address(void **state)
{
    char *c1 = bearer(fx.key, NULL), *c2 = bearer(fx.key, "{\"sub\":\"c2\"}");
    const uint64_t t0 = 5 * (SVC_NS_PER_MS * 1000);
    gw_guard_verdict_t v;

    check(c1, 0, 0, t0, &v);
    assert_int_equal(v.status, 0);
    assert_true(v.has_rl);
    assert_string_equal(v.rl.policy, "\"read\";q=2;w=2");
    assert_string_equal(v.rl.ratelimit, "\"read\";r=1;t=1");
    check(c1, 0, 0, t0, &v);
    assert_int_equal(v.status, 0);
    check(c1, 0, 0, t0, &v);
    assert_int_equal(v.status, 429);
    assert_int_equal(v.grpc_code, 8);
    assert_string_equal(v.rl.retry_after, "1");
    check(c2, 0, 0, t0, &v); /* another subject, same address */
    assert_int_equal(v.status, 0);
    check(NULL, 0, 0, t0, &v); /* anonymous: the address's own bucket */
    assert_int_equal(v.status, 0);
    check(c1, 0, 0, t0 + (SVC_NS_PER_MS * 1000), &v); /* a token back after a second */
    assert_int_equal(v.status, 0);
    check(c1, 0, -1, t0 + (SVC_NS_PER_MS * 1000), &v); /* a route without a class */
    assert_int_equal(v.status, 0);
    assert_false(v.has_rl);
    free(c1);
    free(c2);
    (void)state;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(public_route_takes_anonymous_and_valid_tokens),
        cmocka_unit_test(token_required_takes_any_valid_token),
        cmocka_unit_test(invalid_tokens_are_401_invalid_token_everywhere),
        cmocka_unit_test(scoped_route_needs_a_token_with_one_of_its_scopes),
        cmocka_unit_test(rate_limit_per_subject_or_address),
    };
    return svc_test_run_group_tests_name("guard", tests, setup, teardown);
}
