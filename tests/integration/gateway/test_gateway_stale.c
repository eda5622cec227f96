/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_stale.c - stale reads (issue 16, docs/gateway.md "Stale
 * reads"): with the catalog killed (kill -9), GET /v1/products/{id} and
 * GET /v1/products are answered with their last 200 - the same body, the
 * stale headers - for GATEWAY_STALE_MAX_AGE_MS, then 503 again; a product
 * never read, a 404, and every POST stay 503; a catalog back on its port
 * gives fresh answers without the headers. With a frozen catalog a
 * Grpc-Timeout runs out and the stale answer says 504. With
 * GATEWAY_STALE_READS=off nothing changes: 503. Real Postgres, catalog and
 * gateway; the teardown requires exit 0 (in the ASan build: no leaks).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gw_it.h"

/* The staleness bound of these tests, before scaling: long enough for the
 * stale phase's requests, short enough to wait out. */
#define BOUND_MS 3000

static char bound_env[64];

static int setup_stale(void **state)
{
    /* Quick retries, so that the breaker opens within the stale phase;
     * a 1 s cooldown, so that the restarted catalog is tried soon. */
    static const char *const env[] = {"GATEWAY_BACKOFF_BASE_MS=10", "GATEWAY_BACKOFF_CAP_MS=20",
                                      "GATEWAY_BREAKER_COOLDOWN_MS=1000", bound_env, NULL};

    snprintf(bound_env, sizeof bound_env, "GATEWAY_STALE_MAX_AGE_MS=%d", it_ms(BOUND_MS));
    return gw_it_setup_env(state, false, env);
}

static int setup_stale_off(void **state)
{
    static const char *const env[] = {"GATEWAY_BACKOFF_BASE_MS=10", "GATEWAY_BACKOFF_CAP_MS=20",
                                      "GATEWAY_STALE_READS=off", NULL};

    return gw_it_setup_env(state, false, env);
}

static int setup_default(void **state)
{
    return gw_it_setup_env(state, false, NULL);
}

static const char *const stale_headers[] = {"X-Shopmicro-Stale", "Warning", "Cache-Status", "Age",
                                            NULL};

/* A 200 as the catalog gave it: none of the stale headers. */
static void assert_fresh(const gw_res_t *r, const char *body)
{
    char v[256];

    if (body != NULL)
        gw_assert_body(r, 200, body);
    else
        gw_assert_status(r, 200);
    for (size_t i = 0; stale_headers[i] != NULL; i++)
        if (gw_res_header(r, stale_headers[i], v, sizeof v))
            fail_msg("a fresh answer carries %s: %s", stale_headers[i], v);
}

/* A stale answer: 200, exactly the body sent before, and the headers of
 * docs/gateway.md; fwd-status the status it stands in for. */
static void assert_stale(const gw_res_t *r, const char *body, int fwd_status, char *detail,
                         size_t detail_len)
{
    char v[256], want[80];
    const char *d;
    long age;

    gw_assert_body(r, 200, body);
    if (!gw_res_header(r, "X-Shopmicro-Stale", v, sizeof v) || strcmp(v, "true") != 0)
        fail_msg("no X-Shopmicro-Stale: true on a stale answer (head: %s)", r->head);
    assert_true(gw_res_header(r, "Warning", v, sizeof v));
    assert_string_equal(v, "110 - \"Response is Stale\"");
    assert_true(gw_res_header(r, "Cache-Status", v, sizeof v));
    snprintf(want, sizeof want, "shopmicro-gateway; fwd=stale; fwd-status=%d; detail=", fwd_status);
    if (strncmp(v, want, strlen(want)) != 0)
        fail_msg("Cache-Status: %s, want %s...", v, want);
    d = v + strlen(want);
    assert_true(strlen(d) > 0 && strspn(d, "abcdefghijklmnopqrstuvwxyz-") == strlen(d));
    if (detail != NULL)
        snprintf(detail, detail_len, "%s", d);
    assert_true(gw_res_header(r, "Age", v, sizeof v));
    assert_true(strspn(v, "0123456789") == strlen(v) && strlen(v) > 0);
    age = atol(v);
    assert_true(age >= 0 && age <= it_ms(BOUND_MS) / 1000);
    /* the fresh answer's header is kept */
    assert_true(gw_res_header(r, "Grpc-Metadata-Content-Type", v, sizeof v));
    assert_string_equal(v, "application/grpc");
}

/* A failure as before: the status and code, and no stale header. */
static void assert_failure(const gw_res_t *r, long status, int code)
{
    char v[256];

    gw_assert_error(r, status, code, "");
    for (size_t i = 0; stale_headers[i] != NULL; i++)
        if (gw_res_header(r, stale_headers[i], v, sizeof v))
            fail_msg("a %ld carries %s: %s", status, stale_headers[i], v);
}

/* The value of one metrics series ("name{labels}"), -1 when absent. */
static long long metric(CURL *h, const gw_it_t *t, const char *series)
{
    char pat[256];
    const char *p;
    long long v = -1;
    gw_res_t r;

    gw_admin_get(h, t, "/metrics", &r);
    gw_assert_status(&r, 200);
    snprintf(pat, sizeof pat, "\n%s ", series);
    p = strstr(r.body, pat);
    if (p != NULL)
        v = strtoll(p + strlen(pat), NULL, 10);
    gw_res_free(&r);
    return v;
}

static char *dup_body(const gw_res_t *r)
{
    char *b = strdup(r->body);

    assert_non_null(b);
    return b;
}

static void sleep_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* Adds up, over the gateway's log, the warn lines of stale answers to GET
 * /v1/products/{id} for reason, and the counts of those the limiter left
 * out (" repeated=N" on a written line or on its summary line). */
static void stale_lines(const gw_it_t *t, const char *reason, size_t *written, size_t *accounted)
{
    char key[128], kv[160];
    char *log = spawn_log_read(t->gw), *line, *save = NULL;

    assert_non_null(log);
    snprintf(key, sizeof key, "repeat_key=\"stale GET /v1/products/{id} %s\"", reason);
    snprintf(kv, sizeof kv,
             "route=\"/v1/products/{id}\" upstream=catalog reason=%s grpc_code=", reason);
    *written = *accounted = 0;
    for (line = strtok_r(log, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        const char *rep = strstr(line, " repeated=");
        bool mine = strstr(line, "msg=\"served a stale answer") != NULL && strstr(line, kv) != NULL;
        if (mine)
            (*written)++;
        if (mine || strstr(line, key) != NULL)
            *accounted += (mine ? 1 : 0) + (rep != NULL ? strtoul(rep + 10, NULL, 10) : 0);
    }
    free(log);
}

#define GET_ANSWERS  "gateway_stale_answers_total{route=\"/v1/products/{id}\"}"
#define LIST_ANSWERS "gateway_stale_answers_total{route=\"/v1/products\"}"
#define GET_MISSES   "gateway_stale_misses_total{route=\"/v1/products/{id}\"}"

static void catalog_killed_reads_are_served_stale_within_the_bound(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char id[37], unread[37], path[80], unread_path[80], detail[64], errbuf[SVC_ERRBUF_LEN] = "";
    char *product, *list;
    uint64_t stored_at, burst_at;
    size_t written, accounted, open_answers = 0;
    int stale_gets = 0, tries = 0;
    gw_res_t r;

    gw_it_product(h, t, "stale mug", 1299, 7, id);
    gw_it_product(h, t, "never read", 100, 1, unread);
    snprintf(path, sizeof path, "/v1/products/%s", id);
    snprintf(unread_path, sizeof unread_path, "/v1/products/%s", unread);

    /* Catalog up: fresh answers, no stale header; each 200 is kept. */
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    assert_fresh(&r, NULL);
    assert_non_null(strstr(r.body, "\"name\":\"stale mug\""));
    product = dup_body(&r);
    gw_res_free(&r);
    gw_call(h, t, "GET", "/v1/products?page_size=10", NULL, NULL, &r);
    assert_fresh(&r, NULL);
    assert_non_null(strstr(r.body, id));
    list = dup_body(&r);
    gw_res_free(&r);
    stored_at = it_now_ms();
    gw_call(h, t, "GET", "/v1/products/does-not-exist", NULL, NULL, &r);
    gw_assert_error(&r, 404, 5, "not found"); /* a 404 is not kept */
    gw_res_free(&r);
    assert_int_equal(metric(h, t, "gateway_stale_cache_entries"), 2);
    assert_int_equal(metric(h, t, GET_ANSWERS), -1);

    gw_it_catalog_kill(t);

    /* The same reads: 200, the same bodies, marked stale. The first calls
     * fail after their attempts (fwd-status 503). */
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    assert_stale(&r, product, 503, detail, sizeof detail);
    print_message("  the first stale answer:\n%s%s\n", r.head, r.body);
    gw_res_free(&r);
    stale_gets++;
    gw_call(h, t, "GET", "/v1/products?page_size=10", NULL, NULL, &r);
    assert_stale(&r, list, 503, NULL, 0);
    gw_res_free(&r);
    /* the same request spelled another way ("10" percent-encoded) */
    gw_call(h, t, "GET", "/v1/products?page_size=%31%30", NULL, NULL, &r);
    assert_stale(&r, list, 503, NULL, 0);
    gw_res_free(&r);
    /* ... but not another request: a different page */
    gw_call(h, t, "GET", "/v1/products?page_size=11", NULL, NULL, &r);
    assert_failure(&r, 503, 14);
    gw_res_free(&r);
    /* never read, or read as a 404: nothing to serve */
    gw_call(h, t, "GET", unread_path, NULL, NULL, &r);
    assert_failure(&r, 503, 14);
    gw_res_free(&r);
    gw_call(h, t, "GET", "/v1/products/does-not-exist", NULL, NULL, &r);
    assert_failure(&r, 503, 14);
    gw_res_free(&r);
    /* a write is never answered from the cache */
    gw_call(h, t, "POST", "/v1/products", "{\"name\":\"stale mug\",\"priceCents\":1299}", NULL, &r);
    assert_failure(&r, 503, 14);
    gw_res_free(&r);
    /* By now the breaker is open: stale answers at once, detail breaker-open
     * (a burst: their log lines are limited). */
    burst_at = it_now_ms();
    for (int i = 0; i < 30; i++) {
        gw_call(h, t, "GET", path, NULL, NULL, &r);
        assert_stale(&r, product, 503, detail, sizeof detail);
        open_answers += strcmp(detail, "breaker-open") == 0;
        gw_res_free(&r);
        stale_gets++;
    }
    if (open_answers == 0)
        fail_msg("no stale answer with detail=breaker-open (last: %s)", detail);
    gw_call(h, t, "GET", unread_path, NULL, NULL, &r);
    gw_assert_error(&r, 503, 14, "circuit open");
    gw_res_free(&r);
    if (it_now_ms() - stored_at >= (uint64_t)it_ms(BOUND_MS))
        fail_msg("the stale phase took %llu ms, past the %d ms bound: too slow to tell",
                 (unsigned long long)(it_now_ms() - stored_at), it_ms(BOUND_MS));

    assert_int_equal(metric(h, t, GET_ANSWERS), stale_gets);
    assert_int_equal(metric(h, t, LIST_ANSWERS), 2);
    assert_int_equal(metric(h, t, GET_MISSES), 3);
    assert_int_equal(metric(h, t, "gateway_stale_misses_total{route=\"/v1/products\"}"), 1);
    /* Each stale answer has its access line (status 200, what the upstream
     * did, stale=true); the warn lines are the first of each reason and then
     * at most one a second, and the counts of the rest add up. */
    assert_true(spawn_log_contains(t->gw, "status=200"));
    assert_true(spawn_log_count(t->gw, "grpc_code=UNAVAILABLE upstream=catalog "
                                       "reason=breaker-open attempts=0 stale=true age_ms=") >=
                open_answers);
    for (uint64_t until = it_now_ms() + (uint64_t)it_ms(3000);;) {
        stale_lines(t, "breaker-open", &written, &accounted);
        if (accounted >= open_answers || it_now_ms() >= until)
            break;
        sleep_ms(100);
    }
    print_message("  %zu stale breaker-open answers: %zu warn lines, the rest counted\n",
                  open_answers, written);
    assert_int_equal(accounted, open_answers);
    assert_true(written >= 1 && written <= 2 + (it_now_ms() - burst_at) / 1000);

    /* Past the bound: 503 again, and the entries are gone. */
    sleep_ms((int)((int64_t)stored_at + it_ms(BOUND_MS) + 100 - (int64_t)it_now_ms()));
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    assert_failure(&r, 503, 14);
    gw_res_free(&r);
    gw_call(h, t, "GET", "/v1/products?page_size=10", NULL, NULL, &r);
    assert_failure(&r, 503, 14);
    gw_res_free(&r);
    assert_int_equal(metric(h, t, "gateway_stale_cache_entries"), 0);
    assert_int_equal(metric(h, t, "gateway_stale_cache_expired_total"), 2);
    assert_int_equal(metric(h, t, GET_MISSES), 4);

    /* The catalog back on its port: fresh answers without the headers once
     * the breaker's trial has gone through. */
    if (gw_it_catalog_restart(t, errbuf) != SVC_OK)
        fail_msg("%s", errbuf);
    for (;;) {
        gw_call(h, t, "GET", path, NULL, NULL, &r);
        if (r.status == 200 || tries++ > it_ms(10000) / 100)
            break;
        gw_res_free(&r);
        sleep_ms(100);
    }
    assert_fresh(&r, product);
    gw_res_free(&r);
    gw_call(h, t, "GET", "/v1/products?page_size=10", NULL, NULL, &r);
    assert_fresh(&r, list);
    gw_res_free(&r);
    assert_int_equal(metric(h, t, "gateway_stale_cache_entries"), 2);
    free(product);
    free(list);
    curl_easy_cleanup(h);
}

/* A frozen catalog: the request's own deadline runs out, and the stale
 * answer stands in for the 504. */
static void catalog_frozen_deadline_is_served_stale(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    const char *deadline[] = {"Grpc-Timeout: 300m", NULL};
    char id[37], unread[37], path[80], detail[64];
    char *product;
    gw_res_t r;

    gw_it_product(h, t, "frozen mug", 500, 2, id);
    gw_it_product(h, t, "frozen unread", 500, 2, unread);
    snprintf(path, sizeof path, "/v1/products/%s", id);
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    assert_fresh(&r, NULL);
    product = dup_body(&r);
    gw_res_free(&r);

    gw_it_freeze(t->cat.proc);
    gw_call(h, t, "GET", path, NULL, deadline, &r);
    assert_stale(&r, product, 504, detail, sizeof detail);
    if (r.ms < 280)
        fail_msg("stale after %.1f ms: before the 300 ms deadline", r.ms);
    gw_res_free(&r);
    snprintf(path, sizeof path, "/v1/products/%s", unread);
    gw_call(h, t, "GET", path, NULL, deadline, &r);
    assert_failure(&r, 504, 4);
    gw_res_free(&r);
    spawn_signal(t->cat.proc, SIGCONT);
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    assert_fresh(&r, NULL);
    gw_res_free(&r);
    free(product);
    curl_easy_cleanup(h);
}

static void stale_reads_off_fail_as_before(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char id[37], path[80];
    gw_res_t r;

    gw_it_product(h, t, "plain mug", 700, 3, id);
    snprintf(path, sizeof path, "/v1/products/%s", id);
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    assert_fresh(&r, NULL);
    gw_res_free(&r);
    gw_call(h, t, "GET", "/v1/products?page_size=10", NULL, NULL, &r);
    assert_fresh(&r, NULL);
    gw_res_free(&r);
    /* no cache, so none of its series */
    assert_int_equal(metric(h, t, "gateway_stale_cache_entries"), -1);

    gw_it_catalog_kill(t);
    for (int i = 0; i < 8; i++) {
        gw_call(h, t, "GET", i % 2 == 0 ? path : "/v1/products?page_size=10", NULL, NULL, &r);
        assert_failure(&r, 503, 14);
        gw_res_free(&r);
    }
    assert_int_equal(metric(h, t, GET_ANSWERS), -1);
    assert_int_equal(metric(h, t, GET_MISSES), -1);
    assert_false(spawn_log_contains(t->gw, "served a stale answer"));
    curl_easy_cleanup(h);
}

/* The defaults: on, 30 s, as --help and the start-up line say. */
static void defaults_are_on_with_a_30s_bound(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();

    assert_true(spawn_log_contains(t->gw, "config GATEWAY_STALE_READS=true"));
    assert_true(spawn_log_contains(t->gw, "config GATEWAY_STALE_MAX_AGE_MS=30000"));
    assert_true(spawn_log_contains(t->gw, "config GATEWAY_STALE_MAX_ENTRIES=4096"));
    assert_true(spawn_log_contains(t->gw, "config GATEWAY_STALE_MAX_BYTES=8388608"));
    assert_int_equal(metric(h, t, "gateway_stale_cache_entries"), 0);
    curl_easy_cleanup(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(catalog_killed_reads_are_served_stale_within_the_bound,
                                        setup_stale, gw_it_teardown),
        cmocka_unit_test_setup_teardown(catalog_frozen_deadline_is_served_stale, setup_stale,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(stale_reads_off_fail_as_before, setup_stale_off,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(defaults_are_on_with_a_30s_bound, setup_default,
                                        gw_it_teardown),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests_name("gateway_stale", tests, NULL, NULL);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
