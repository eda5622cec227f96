/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_shed.c - the catalog sheds load (its test-only fault knobs:
 * one slot, a grpc-retry-pushback-ms hint on every call refused), and the
 * hint travels to the HTTP client (issue 15):
 *
 *   - GET /v1/products/{id}: the gateway waits out a pushback that fits its
 *     deadline and retries (200); one that does not fit is answered at once
 *     with 429 RESOURCE_EXHAUSTED and Retry-After in seconds, rounded up;
 *   - POST /v1/orders: order's pricing call is shed; order answers
 *     UNAVAILABLE with the catalog's hint, the gateway 503 with Retry-After,
 *     and no order is written.
 *
 * The catalog's own counters (its /debug/fault answer) say how many calls it
 * refused, so the tests see each retry, not just the final status.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gw_it.h"

static char admin[32];

static int setup(void **state)
{
    static char listen[64];
    static const char *const cat_env[] = {listen, "CATALOG_FAULT_KNOBS=on", NULL};

    snprintf(admin, sizeof admin, "127.0.0.1:%d", spawn_free_port());
    snprintf(listen, sizeof listen, "CATALOG_ADMIN_LISTEN=%s", admin);
    return gw_it_setup_envs(state, true, cat_env, NULL);
}

/* A number field of the knobs' JSON answer. */
static long long json_num(const char *json, const char *key)
{
    char pat[40];
    const char *p;

    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(json, pat);
    if (p == NULL)
        fail_msg("no %s in %s", key, json);
    return strtoll(p + strlen(pat), NULL, 10);
}

/* POSTs form to the catalog's /debug/fault; its counter `key` afterwards
 * (form "" only reads). */
static long long knobs(const char *form, const char *key)
{
    gw_it_t fake = {.port = 0};
    CURL *h = curl_easy_init();
    gw_res_t r;
    long long v;

    snprintf(fake.base, sizeof fake.base, "http://%s", admin);
    gw_call(h, &fake, "POST", "/debug/fault", form, NULL, &r);
    gw_assert_status(&r, 200);
    v = json_num(r.body, key);
    gw_res_free(&r);
    curl_easy_cleanup(h);
    return v;
}

typedef struct holder {
    gw_it_t *t;
    char id[37];
    pthread_t th;
} holder_t;

/* A GetProduct straight to the catalog that takes its only slot for the
 * knobs' latency. */
static void *hold(void *arg)
{
    holder_t *h = arg;
    it_product_t *p = NULL;
    rpc_result_t res;

    it_get(h->t->cat.ch, h->id, 10000, &p, &res);
    it_free(p);
    return NULL;
}

/* Sets the knobs (one slot) and starts a holder; returns when it holds the
 * slot. */
static void take_the_slot(holder_t *h, gw_it_t *t, const char *id, const char *form)
{
    h->t = t;
    snprintf(h->id, sizeof h->id, "%s", id);
    (void)knobs(form, "slots");
    assert_int_equal(pthread_create(&h->th, NULL, hold, h), 0);
    for (int i = 0; i < 1000 && knobs("", "in_flight") < 1; i++)
        usleep(10 * 1000);
    assert_int_equal(knobs("", "in_flight"), 1);
}

static void shed_get_is_retried_after_the_pushback(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char id[37], path[80];
    holder_t hd;
    gw_res_t r;

    gw_it_product(h, t, "shed-me", 100, 1, id);
    snprintf(path, sizeof path, "/v1/products/%s", id);
    take_the_slot(&hd, t, id, "off=1&slots=1&latency_ms=600&pushback_ms=900");
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    gw_assert_status(&r, 200); /* refused once, then served after 900 ms */
    if (r.ms < 850)            /* a lower bound: a slower (sanitizer) build only waits longer */
        fail_msg("served after %.1f ms: before the 900 ms pushback ran out", r.ms);
    gw_res_free(&r);
    pthread_join(hd.th, NULL);
    assert_int_equal(knobs("off=1", "rejected"), 1);
    curl_easy_cleanup(h);
}

static void shed_get_past_the_deadline_is_429_with_retry_after(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char id[37], path[80], v[16];
    holder_t hd;
    gw_res_t r;

    gw_it_product(h, t, "shed-me-too", 100, 1, id);
    snprintf(path, sizeof path, "/v1/products/%s", id);
    /* 20.5 s is past the gateway's 10 s deadline: no retry, the hint goes on. */
    take_the_slot(&hd, t, id, "off=1&slots=1&latency_ms=1500&pushback_ms=20500");
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    gw_assert_error(&r, 429, 8, "slots busy");
    assert_true(gw_res_header(&r, "Retry-After", v, sizeof v));
    assert_string_equal(v, "21");
    gw_res_free(&r);
    pthread_join(hd.th, NULL);
    assert_int_equal(knobs("off=1", "rejected"), 1);
    curl_easy_cleanup(h);
}

static void shed_pricing_is_503_with_retry_after_and_writes_nothing(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char id[37], body[160], v[16];
    holder_t hd;
    gw_res_t r;

    gw_it_product(h, t, "shed-order", 250, 5, id);
    snprintf(body, sizeof body,
             "{\"customer_id\":\"c1\",\"items\":[{\"product_id\":\"%s\",\"quantity\":1}]}", id);
    take_the_slot(&hd, t, id, "off=1&slots=1&latency_ms=1500&pushback_ms=20500");
    gw_call(h, t, "POST", "/v1/orders", body, NULL, &r);
    gw_assert_status(&r, 503);
    assert_true(gw_res_header(&r, "Retry-After", v, sizeof v));
    assert_string_equal(v, "21");
    /* the catalog's reason, as the project's phrase (gateway/message.h) */
    assert_non_null(strstr(r.body, "catalog unavailable: catalog overloaded"));
    gw_res_free(&r);
    pthread_join(hd.th, NULL);
    assert_int_equal(knobs("off=1", "rejected"), 1);
    {
        char errbuf[SVC_ERRBUF_LEN] = "";
        int64_t n = -1;
        assert_int_equal(
            pgtest_scalar_int(t->ord_db.dsn, "SELECT count(*) FROM orders", &n, errbuf), SVC_OK);
        assert_int_equal(n, 0);
        assert_int_equal(
            pgtest_scalar_int(t->ord_db.dsn, "SELECT count(*) FROM outbox", &n, errbuf), SVC_OK);
        assert_int_equal(n, 0);
    }
    curl_easy_cleanup(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(shed_get_is_retried_after_the_pushback, setup,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(shed_get_past_the_deadline_is_429_with_retry_after, setup,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(shed_pricing_is_503_with_retry_after_and_writes_nothing,
                                        setup, gw_it_teardown),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests_name("gateway_shed", tests, NULL, NULL);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
