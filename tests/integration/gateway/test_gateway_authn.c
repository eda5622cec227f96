/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_authn.c - who may call the gateway, and how often (issue 36;
 * docs/gateway.md, "Security"), against the real gateway, catalog, order
 * and Postgres, with tokens of the test's own issuer (gw_token.h):
 *
 *   - a write without a token is 401 with a Bearer challenge; a token
 *     signed by another key, expired, not yet valid, for another audience
 *     or issuer is 401 invalid_token, on public routes too; one without
 *     the route's scope is 403 insufficient_scope; product reads need none;
 *   - an order is the token's subject's: a body naming another customer is
 *     403, one naming none is placed for the subject; another customer's
 *     GET is 404, the owner's and an orders:admin's 200, and a client's
 *     Grpc-Metadata-X-Shopmicro-Subject changes nothing;
 *   - a burst past the route class's limit is 429 with Retry-After and the
 *     RateLimit headers, per subject;
 *   - a key added to the JWKS file is honoured without a restart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gw_it.h"
#include "gw_token.h"
#include "support/scale.h"

typedef struct fx {
    gw_it_t *t;
    CURL *h;
} fx_t;

static int setup_with(void **state, const char *const *env)
{
    fx_t *f = calloc(1, sizeof *f);
    void *t = NULL;

    if (f == NULL || gw_it_setup_env(&t, true, env) != 0) {
        free(f);
        return -1;
    }
    f->t = t;
    f->h = curl_easy_init();
    *state = f;
    return f->h != NULL ? 0 : -1;
}

static int setup(void **state)
{
    return setup_with(state, NULL);
}

static int setup_limited(void **state)
{
    static const char *const env[] = {"GATEWAY_RATE_LIMITS=read=1/m,burst=3;write=1/m,burst=2",
                                      NULL};
    return setup_with(state, env);
}

static int setup_private(void **state)
{
    static const char *const env[] = {"GATEWAY_PUBLIC_READS=off", NULL};
    return setup_with(state, env);
}

static int teardown(void **state)
{
    fx_t *f = *state;
    void *t;
    int rc;

    if (f == NULL)
        return 0;
    t = f->t;
    curl_easy_cleanup(f->h);
    rc = gw_it_teardown(&t);
    free(f);
    return rc;
}

/* A request with Authorization "Bearer tok" (tok NULL: none at all). */
static void call_as(fx_t *f, const char *tok, const char *method, const char *path,
                    const char *body, gw_res_t *r)
{
    char auth[GW_IT_AUTH_MAX];
    const char *hdrs[3] = {NULL, NULL, NULL};
    gw_req_t rq = {method, path, body, 0, hdrs, 0, tok == NULL};

    if (tok != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
        hdrs[0] = auth;
    }
    gw_do(f->h, f->t, &rq, r);
}

static void assert_challenge(const gw_res_t *r, const char *want)
{
    char got[256];

    if (!gw_res_header(r, "WWW-Authenticate", got, sizeof got))
        fail_msg("no WWW-Authenticate in:\n%s", r->head);
    assert_string_equal(got, want);
}

#define INVALID "Bearer realm=\"shopmicro\", error=\"invalid_token\""

static void writes_need_a_token_with_their_scope(void **state)
{
    fx_t *f = *state;
    char *reader = gw_token("c1", "orders:read");
    const char *product = "{\"name\":\"Lamp\",\"price_cents\":4200,\"stock\":5}";
    gw_res_t r;

    call_as(f, NULL, "POST", "/v1/products", product, &r);
    gw_assert_error(&r, 401, 16, "this route needs a bearer token");
    gw_assert_error_info(&r, "TOKEN_MISSING", "gateway.shopmicro");
    assert_challenge(&r, "Bearer realm=\"shopmicro\"");
    gw_res_free(&r);
    call_as(f, reader, "POST", "/v1/products", product, &r);
    gw_assert_error(&r, 403, 7, "lacks the scope");
    assert_challenge(&r, "Bearer realm=\"shopmicro\", error=\"insufficient_scope\", "
                         "scope=\"catalog:write\"");
    gw_res_free(&r);
    call_as(f, reader, "POST", "/v1/orders", "{\"items\":[]}", &r);
    gw_assert_error(&r, 403, 7, "lacks the scope");
    gw_res_free(&r);
    /* product reads are public */
    call_as(f, NULL, "GET", "/v1/products?page_size=1", NULL, &r);
    gw_assert_status(&r, 200);
    gw_res_free(&r);
    call_as(f, NULL, "GET", "/v1/orders/00000000-0000-4000-8000-000000000000", NULL, &r);
    gw_assert_error(&r, 401, 16, "needs a bearer token");
    gw_res_free(&r);
    free(reader);
}

static void tokens_that_do_not_verify_are_401_everywhere(void **state)
{
    fx_t *f = *state;
    const gw_token_opts_t bad[] = {
        {.sub = "c1", .scope = GW_TOKEN_ALL_SCOPES, .key = GW_TOKEN_KEY_FORGED},
        {.sub = "c1", .scope = GW_TOKEN_ALL_SCOPES, .iat_offset_s = -7200, .ttl_s = 3600},
        {.sub = "c1", .scope = GW_TOKEN_ALL_SCOPES, .has_nbf = true, .nbf_offset_s = 600},
        {.sub = "c1", .scope = GW_TOKEN_ALL_SCOPES, .aud = "another-api"},
        {.sub = "c1", .scope = GW_TOKEN_ALL_SCOPES, .iss = "https://evil.example"},
    };
    gw_res_t r;

    for (size_t i = 0; i < SVC_COUNTOF(bad); i++) {
        char *tok = gw_token_make(&bad[i]);
        call_as(f, tok, "GET", "/v1/products?page_size=1", NULL, &r);
        if (r.status != 401)
            fail_msg("token %zu: %ld %s", i, r.status, r.body);
        gw_assert_error(&r, 401, 16, "the bearer token is not valid");
        assert_challenge(&r, INVALID);
        gw_res_free(&r);
        call_as(f, tok, "POST", "/v1/orders", "{\"items\":[]}", &r);
        gw_assert_error(&r, 401, 16, "the bearer token is not valid");
        gw_res_free(&r);
        free(tok);
    }
    call_as(f, "not.a.token", "GET", "/v1/products", NULL, &r);
    gw_assert_error(&r, 401, 16, "not valid");
    gw_res_free(&r);
}

/* POST /v1/orders as tok with customer_id `customer` (NULL: none); the order id into id. */
static void order_as(fx_t *f, const char *tok, const char *customer, const char *pid, long want,
                     char id[37], gw_res_t *r)
{
    char body[256];

    if (customer != NULL)
        snprintf(body, sizeof body,
                 "{\"customer_id\":\"%s\",\"items\":[{\"product_id\":\"%s\",\"quantity\":1}]}",
                 customer, pid);
    else
        snprintf(body, sizeof body, "{\"items\":[{\"product_id\":\"%s\",\"quantity\":1}]}", pid);
    call_as(f, tok, "POST", "/v1/orders", body, r);
    gw_assert_status(r, want);
    if (want == 200 && !gw_json_str(r->body, "id", id, 37))
        fail_msg("no order id in %s", r->body);
}

static void orders_belong_to_the_token_subject(void **state)
{
    fx_t *f = *state;
    char *c7 = gw_token("c7", "orders:write orders:read");
    char *c8 = gw_token("c8", "orders:read");
    char *admin = gw_token("support-1", "orders:admin");
    char pid[37], id[37], path[80], customer[64];
    const char *forged[] = {"Grpc-Metadata-X-Shopmicro-Subject: c7",
                            "Grpc-Metadata-X-Shopmicro-Scopes: orders:admin", NULL};
    gw_res_t r;

    gw_it_product(f->h, f->t, "Cup", 500, 50, pid);
    order_as(f, c7, "c8", pid, 403, id, &r);
    gw_assert_error(&r, 403, 7, "customer_id names another customer");
    gw_res_free(&r);
    order_as(f, c7, NULL, pid, 200, id, &r);
    gw_res_free(&r);
    snprintf(path, sizeof path, "/v1/orders/%s", id);
    call_as(f, c8, "GET", path, NULL, &r);
    gw_assert_error(&r, 404, 5, "order not found");
    gw_res_free(&r);
    {
        char auth[GW_IT_AUTH_MAX];
        const char *hdrs[4] = {auth, forged[0], forged[1], NULL};
        gw_req_t rq = {"GET", path, NULL, 0, hdrs, 0, false};
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c8);
        gw_do(f->h, f->t, &rq, &r);
        gw_assert_error(&r, 404, 5, "order not found");
        gw_res_free(&r);
    }
    call_as(f, c7, "GET", path, NULL, &r);
    gw_assert_status(&r, 200);
    if (!gw_json_str(r.body, "customerId", customer, sizeof customer))
        fail_msg("no customerId in %s", r.body);
    assert_string_equal(customer, "c7");
    gw_res_free(&r);
    call_as(f, admin, "GET", path, NULL, &r);
    gw_assert_status(&r, 200);
    gw_res_free(&r);
    free(c7);
    free(c8);
    free(admin);
}

/* The token of a key that is not in the JWKS file yet is refused; once the
 * file lists it (renamed into place, as a deployment rotates), it verifies,
 * and the old key's tokens still do: no restart. */
static void a_key_added_to_the_jwks_file_is_honoured_without_a_restart(void **state)
{
    fx_t *f = *state;
    gw_token_opts_t o = {.sub = "c1", .scope = "orders:read", .key = GW_TOKEN_KEY_NEXT};
    char *next = gw_token_make(&o), *old = gw_token("c1", "orders:read");
    gw_res_t r;
    int ms = 0;

    call_as(f, next, "GET", "/v1/products", NULL, &r);
    gw_assert_status(&r, 401);
    gw_res_free(&r);
    gw_token_publish_next_key();
    for (;; ms += 100) {
        call_as(f, next, "GET", "/v1/products", NULL, &r);
        if (r.status == 200 || ms > svc_test_ms(5000))
            break;
        gw_res_free(&r);
        usleep(100 * 1000);
    }
    gw_assert_status(&r, 200);
    gw_res_free(&r);
    call_as(f, old, "GET", "/v1/products", NULL, &r);
    gw_assert_status(&r, 200);
    gw_res_free(&r);
    free(next);
    free(old);
}

/* write=1/m,burst=2; read=1/m,burst=3 (setup_limited). */
static void a_burst_past_the_limit_is_429_per_subject(void **state)
{
    fx_t *f = *state;
    char *c1 = gw_token("c1", "orders:read"), *c2 = gw_token("c2", "orders:read");
    char v[128];
    gw_res_t r;

    for (int i = 0; i < 3; i++) {
        call_as(f, c1, "GET", "/v1/products", NULL, &r);
        gw_assert_status(&r, 200);
        if (!gw_res_header(&r, "RateLimit-Policy", v, sizeof v))
            fail_msg("no RateLimit-Policy in:\n%s", r.head);
        assert_string_equal(v, "\"read\";q=3;w=180");
        gw_res_free(&r);
    }
    call_as(f, c1, "GET", "/v1/products", NULL, &r);
    gw_assert_error(&r, 429, 8, "too many requests");
    gw_assert_error_info(&r, "RATE_LIMITED", "gateway.shopmicro");
    gw_assert_retry_info(&r);
    assert_true(gw_res_header(&r, "Retry-After", v, sizeof v));
    assert_true(atoi(v) >= 1 && atoi(v) <= 60);
    assert_true(gw_res_header(&r, "RateLimit", v, sizeof v));
    assert_true(strncmp(v, "\"read\";r=0;t=", 13) == 0);
    gw_res_free(&r);
    call_as(f, c2, "GET", "/v1/products", NULL, &r); /* another subject: its own bucket */
    gw_assert_status(&r, 200);
    gw_res_free(&r);
    free(c1);
    free(c2);
}

/* GATEWAY_PUBLIC_READS=off: the catalog's reads take any valid token and
 * no request without one; the health routes stay open to probes. */
static void without_public_reads_every_route_needs_a_token(void **state)
{
    fx_t *f = *state;
    char *none = gw_token("c1", "");
    gw_res_t r;

    call_as(f, NULL, "GET", "/v1/products?page_size=1", NULL, &r);
    gw_assert_error(&r, 401, 16, "this route needs a bearer token");
    assert_challenge(&r, "Bearer realm=\"shopmicro\"");
    gw_res_free(&r);
    call_as(f, none, "GET", "/v1/products?page_size=1", NULL, &r);
    gw_assert_status(&r, 200);
    gw_res_free(&r);
    call_as(f, NULL, "GET", "/healthz", NULL, &r);
    gw_assert_status(&r, 200);
    gw_res_free(&r);
    call_as(f, none, "POST", "/v1/products", "{\"name\":\"x\",\"price_cents\":1}", &r);
    gw_assert_error(&r, 403, 7, "lacks the scope"); /* scoped routes keep their scopes */
    gw_res_free(&r);
    free(none);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(writes_need_a_token_with_their_scope, setup, teardown),
        cmocka_unit_test_setup_teardown(tokens_that_do_not_verify_are_401_everywhere, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(orders_belong_to_the_token_subject, setup, teardown),
        cmocka_unit_test_setup_teardown(a_key_added_to_the_jwks_file_is_honoured_without_a_restart,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_burst_past_the_limit_is_429_per_subject, setup_limited,
                                        teardown),
        cmocka_unit_test_setup_teardown(without_public_reads_every_route_needs_a_token,
                                        setup_private, teardown),
    };
    cat_it_global_init();
    int rc = cmocka_run_group_tests_name("gateway_authn", tests, NULL, NULL);
    cat_it_global_fini();
    return rc;
}
