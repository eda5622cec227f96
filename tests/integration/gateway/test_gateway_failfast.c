/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_failfast.c - the fail-fast window of POST /v1/orders (issue
 * 17; docs/gateway.md, "Fail-fast windows"), with the real gateway, order,
 * catalog and Postgres:
 *
 *   - the catalog killed, order's breaker for it opens and order refuses
 *     CreateOrder with its cooldown as the hint; from then on the gateway
 *     answers POST /v1/orders itself (503, google.rpc.Status body,
 *     Retry-After), its gateway_failfast_answers_total grows and order's
 *     count of refused CreateOrders does not;
 *   - GET /v1/orders/{id} stays 200 all along: order itself is fine;
 *   - the catalog restarted, a probe reaches order once the window has
 *     passed, and orders succeed again;
 *   - with GATEWAY_FAILFAST=off every refusal comes from order, as before.
 *
 * No assertion on speed: what is checked is who answered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gw_it.h"

/* Order's admin port (its /metrics), set for the order the fixture starts. */
static char order_admin[32];

static int setup_with(void **state, const char *const *gw_env)
{
    /* The order process inherits these: a known admin port, and a breaker
     * for the catalog that opens fast (short backoffs) and cools down in
     * 3 s, so that the test does not wait out the default 10 s. */
    snprintf(order_admin, sizeof order_admin, "127.0.0.1:%d", spawn_free_port());
    setenv("ORDER_ADMIN_LISTEN", order_admin, 1);
    setenv("ORDER_CATALOG_BACKOFF_BASE_MS", "5", 1);
    setenv("ORDER_CATALOG_BACKOFF_CAP_MS", "10", 1);
    setenv("ORDER_CATALOG_BREAKER_COOLDOWN_MS", "3000", 1);
    return gw_it_setup_env(state, true, gw_env);
}

static int setup_failfast(void **state)
{
    /* A window as long as order's whole cooldown, so that a burst of
     * requests fits in one window (the default cap probes every second). */
    static const char *const env[] = {"GATEWAY_FAILFAST_MAX_WINDOW_MS=5000", NULL};
    return setup_with(state, env);
}

static int setup_off(void **state)
{
    static const char *const env[] = {"GATEWAY_FAILFAST=off", NULL};
    return setup_with(state, env);
}

/* The value of the first series of `metrics` whose line starts with, or
 * contains, `series` followed by a space; -1 when absent. */
static long long series_value(const char *metrics, const char *series)
{
    char pat[512];
    const char *p;

    snprintf(pat, sizeof pat, "%s ", series);
    p = strstr(metrics, pat);
    return p != NULL ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* CreateOrders order answered UNAVAILABLE so far (pkg/rpc counts a call once
 * it is completely over, just after the client has its answer: read after
 * a pause). */
static long long order_refusals(CURL *h, const gw_it_t *t)
{
    gw_it_t admin = *t;
    gw_res_t r;
    long long n;

    usleep(200 * 1000);
    snprintf(admin.base, sizeof admin.base, "http://%s", order_admin);
    gw_call(h, &admin, "GET", "/metrics", NULL, NULL, &r);
    gw_assert_status(&r, 200);
    /* pkg/rpc shows a code once it has been seen (grpc-go's code names) */
    n = series_value(r.body, "grpc_method=\"CreateOrder\",grpc_code=\"Unavailable\"}");
    if (n < 0)
        fail_msg("order has refused no CreateOrder yet:\n%s", r.body);
    gw_res_free(&r);
    return n;
}

static long long gateway_series(CURL *h, const gw_it_t *t, const char *series)
{
    gw_res_t r;
    long long n;

    gw_admin_get(h, t, "/metrics", &r);
    gw_assert_status(&r, 200);
    n = series_value(r.body, series);
    gw_res_free(&r);
    return n;
}

#define ANSWERS "gateway_failfast_answers_total{route=\"/v1/orders\",method=\"POST\"}"
#define PROBES  "gateway_failfast_probes_total{route=\"/v1/orders\",method=\"POST\"}"

/* A 503 refusal of POST /v1/orders: the upstream's body and a Retry-After
 * of 1..3 s (order's cooldown). */
static void expect_refusal(const gw_res_t *r)
{
    char v[16];

    gw_assert_error(r, 503, 14, "circuit open");
    assert_non_null(strstr(r->body, "catalog unavailable"));
    if (!gw_res_header(r, "Retry-After", v, sizeof v))
        fail_msg("a 503 without Retry-After: %s", r->body);
    if (atoi(v) < 1 || atoi(v) > 3)
        fail_msg("Retry-After: %s, want 1..3 (order's cooldown is 3 s)", v);
}

/* Kills the catalog and orders until order's breaker for it is open. */
static void open_orders_breaker(CURL *h, gw_it_t *t, const char *body)
{
    gw_res_t r;

    gw_it_catalog_kill(t);
    for (int i = 0;; i++) {
        gw_call(h, t, "POST", "/v1/orders", body, NULL, &r);
        gw_assert_error(&r, 503, 14, "catalog unavailable");
        if (strstr(r.body, "circuit open") != NULL) {
            expect_refusal(&r);
            gw_res_free(&r);
            return;
        }
        gw_res_free(&r);
        if (i == 20)
            fail_msg("order's breaker for the catalog did not open in 20 orders");
    }
}

static void get_order_is_200(CURL *h, const gw_it_t *t, const char *id)
{
    char path[96];
    gw_res_t r;

    snprintf(path, sizeof path, "/v1/orders/%s", id);
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    gw_assert_status(&r, 200);
    assert_non_null(strstr(r.body, id));
    gw_res_free(&r);
}

/* An order placed while everything is up, for the GETs; the body of the
 * orders the test then places into body. */
static void place_first_order(CURL *h, gw_it_t *t, char *body, size_t len, char order_id[64])
{
    char product[37];
    gw_res_t r;

    gw_it_product(h, t, "failfast mug", 1299, 1000, product);
    snprintf(body, len,
             "{\"customer_id\":\"c1\",\"items\":[{\"product_id\":\"%s\",\"quantity\":1}]}",
             product);
    gw_call(h, t, "POST", "/v1/orders", body, NULL, &r);
    gw_assert_status(&r, 200);
    assert_true(gw_json_str(r.body, "id", order_id, 64));
    gw_res_free(&r);
}

static void create_order_fails_fast_while_get_order_stays_200(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char body[160], order_id[64], errbuf[SVC_ERRBUF_LEN] = "";
    long long refused0, answers0, probes0;
    gw_res_t r;
    bool placed = false;

    place_first_order(h, t, body, sizeof body, order_id);
    open_orders_breaker(h, t, body);
    refused0 = order_refusals(h, t);
    answers0 = gateway_series(h, t, ANSWERS);
    probes0 = gateway_series(h, t, PROBES);
    for (int i = 0; i < 30; i++) {
        gw_call(h, t, "POST", "/v1/orders", body, NULL, &r);
        expect_refusal(&r);
        gw_res_free(&r);
        if (i % 10 == 0)
            get_order_is_200(h, t, order_id);
    }
    {
        long long refused = order_refusals(h, t) - refused0;
        long long answered = gateway_series(h, t, ANSWERS) - answers0;
        print_message("  30 POST /v1/orders in the window: %lld answered by the gateway, "
                      "%lld refused by order\n",
                      answered, refused);
        /* At most one went out: a probe, if the window ended meanwhile. */
        assert_true(refused <= 1);
        assert_true(answered >= 29 && answered + refused == 30);
    }

    /* The catalog comes back: once order's cooldown and the window have
     * passed, a probe reaches order, its trial closes its breaker, and
     * orders succeed again. */
    assert_int_equal(gw_it_catalog_restart(t, errbuf), SVC_OK);
    for (uint64_t until = it_now_ms() + (uint64_t)it_ms(15000); !placed;) {
        gw_call(h, t, "POST", "/v1/orders", body, NULL, &r);
        placed = r.status == 200;
        if (!placed)
            expect_refusal(&r);
        gw_res_free(&r);
        if (!placed && it_now_ms() > until)
            fail_msg("no order placed within 15 s of the catalog's restart");
        if (!placed)
            usleep(100 * 1000);
    }
    assert_true(gateway_series(h, t, PROBES) > probes0);
    get_order_is_200(h, t, order_id);
    curl_easy_cleanup(h);
}

static void with_failfast_off_order_answers_every_refusal(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char body[160], order_id[64];
    long long refused0;
    gw_res_t r;

    place_first_order(h, t, body, sizeof body, order_id);
    open_orders_breaker(h, t, body);
    refused0 = order_refusals(h, t);
    for (int i = 0; i < 10; i++) {
        gw_call(h, t, "POST", "/v1/orders", body, NULL, &r);
        expect_refusal(&r);
        gw_res_free(&r);
    }
    assert_int_equal(order_refusals(h, t) - refused0, 10);
    assert_int_equal(gateway_series(h, t, ANSWERS), -1); /* no such series */
    get_order_is_200(h, t, order_id);
    curl_easy_cleanup(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(create_order_fails_fast_while_get_order_stays_200,
                                        setup_failfast, gw_it_teardown),
        cmocka_unit_test_setup_teardown(with_failfast_off_order_answers_every_refusal, setup_off,
                                        gw_it_teardown),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests_name("gateway_failfast", tests, NULL, NULL);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
