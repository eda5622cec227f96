/* SPDX-License-Identifier: Apache-2.0 */
/* test_stale_cache.c - gateway/stale_cache.c on a fake clock: hits, the age
 * bound (inclusive), refresh, replacement, eviction by entries and bytes,
 * expiry, hits held across a replacement, key normalisation and its limits;
 * and gw_upstream_unavailable, the rule for when a stale answer may stand
 * in for a failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "stale_cache.h"
#include "support/fake_clock.h"
#include "upstream.h"

#define START_NS (UINT64_C(1) << 40)

typedef struct fixture {
    fake_clock_t clock;
    gw_cache_t *c;
} fixture_t;

static fixture_t fx;

static gw_cache_t *make(uint64_t max_age_ms, size_t max_entries, size_t max_bytes)
{
    gw_cache_opts_t o;

    fake_clock_init(&fx.clock, START_NS);
    gw_cache_opts_init(&o);
    o.max_age_ms = max_age_ms;
    o.max_entries = max_entries;
    o.max_bytes = max_bytes;
    o.clock = fake_clock_iface(&fx.clock);
    assert_int_equal(gw_cache_new(&o, &fx.c), SVC_OK);
    return fx.c;
}

static int teardown(void **state)
{
    (void)state;
    gw_cache_free(fx.c);
    fx.c = NULL;
    return 0;
}

static bool put(gw_cache_t *c, const char *key, const char *body)
{
    return gw_cache_put(c, key, strlen(key), body, strlen(body));
}

/* The key's body ("" when none), with its age. */
static bool get(gw_cache_t *c, const char *key, char *body, size_t cap, uint64_t *age_ms)
{
    gw_cache_hit_t hit;

    body[0] = '\0';
    if (!gw_cache_get(c, key, strlen(key), &hit))
        return false;
    assert_true(hit.len < cap);
    memcpy(body, hit.body, hit.len);
    body[hit.len] = '\0';
    if (age_ms != NULL)
        *age_ms = hit.age_ms;
    gw_cache_release(c, &hit);
    return true;
}

static gw_cache_stats_t stats(gw_cache_t *c)
{
    gw_cache_stats_t s;

    gw_cache_stats(c, &s);
    return s;
}

static void defaults_and_bad_options(void **state)
{
    gw_cache_opts_t o;
    gw_cache_t *c = NULL;

    (void)state;
    gw_cache_opts_init(&o);
    assert_int_equal(o.max_age_ms, 30000);
    assert_int_equal(o.max_entries, 4096);
    assert_int_equal(o.max_bytes, 8u << 20);
    assert_null(o.clock);
    o.max_age_ms = 0;
    assert_int_equal(gw_cache_new(&o, &c), SVC_EINVAL);
    assert_null(c);
    gw_cache_opts_init(&o);
    o.max_entries = 0;
    assert_int_equal(gw_cache_new(&o, &c), SVC_EINVAL);
    gw_cache_opts_init(&o);
    o.max_bytes = 8 * GW_CACHE_ENTRY_OVERHEAD - 1;
    assert_int_equal(gw_cache_new(&o, &c), SVC_EINVAL);
    gw_cache_free(NULL);
}

static void hit_returns_the_body_and_its_age(void **state)
{
    gw_cache_t *c = make(30000, 16, 1 << 20);
    char body[64];
    uint64_t age = 99;

    (void)state;
    assert_false(get(c, "GET /v1/products/a", body, sizeof body, &age));
    assert_true(put(c, "GET /v1/products/a", "{\"id\":\"a\"}"));
    assert_true(get(c, "GET /v1/products/a", body, sizeof body, &age));
    assert_string_equal(body, "{\"id\":\"a\"}");
    assert_int_equal(age, 0);
    fake_clock_advance_ms(&fx.clock, 2500);
    assert_true(get(c, "GET /v1/products/a", body, sizeof body, &age));
    assert_int_equal(age, 2500);
    /* another key, and a key that only starts the same, miss */
    assert_false(get(c, "GET /v1/products/b", body, sizeof body, NULL));
    assert_false(get(c, "GET /v1/products/", body, sizeof body, NULL));
    assert_false(get(c, "POST /v1/products/a", body, sizeof body, NULL));
    assert_int_equal(stats(c).entries, 1);
    assert_int_equal(stats(c).bytes, GW_CACHE_ENTRY_OVERHEAD + strlen("GET /v1/products/a") +
                                         strlen("{\"id\":\"a\"}"));
}

static void served_up_to_the_bound_and_not_after(void **state)
{
    gw_cache_t *c = make(1000, 16, 1 << 20);
    char body[64];
    uint64_t age = 0;

    (void)state;
    assert_true(put(c, "k", "v"));
    fake_clock_advance_ms(&fx.clock, 1000); /* exactly the bound: still served */
    assert_true(get(c, "k", body, sizeof body, &age));
    assert_int_equal(age, 1000);
    fake_clock_advance_ns(&fx.clock, 1); /* one nanosecond past it: never */
    assert_false(get(c, "k", body, sizeof body, NULL));
    assert_int_equal(stats(c).entries, 0); /* and it is gone */
    assert_int_equal(stats(c).bytes, 0);
    assert_int_equal(stats(c).expired, 1);
    assert_int_equal(stats(c).evictions, 0);
}

static void a_new_answer_restarts_the_age(void **state)
{
    gw_cache_t *c = make(1000, 16, 1 << 20);
    char body[64];
    uint64_t age = 0;

    (void)state;
    assert_true(put(c, "k", "v1"));
    fake_clock_advance_ms(&fx.clock, 800);
    assert_true(put(c, "k", "v1")); /* the same answer again: refreshed */
    fake_clock_advance_ms(&fx.clock, 800);
    assert_true(get(c, "k", body, sizeof body, &age));
    assert_string_equal(body, "v1");
    assert_int_equal(age, 800);
    assert_true(put(c, "k", "v2-longer")); /* a different one replaces it */
    fake_clock_advance_ms(&fx.clock, 300);
    assert_true(get(c, "k", body, sizeof body, &age));
    assert_string_equal(body, "v2-longer");
    assert_int_equal(age, 300);
    assert_int_equal(stats(c).entries, 1);
    assert_int_equal(stats(c).bytes, GW_CACHE_ENTRY_OVERHEAD + 1 + strlen("v2-longer"));
    assert_int_equal(stats(c).evictions, 0);
}

static void full_by_entries_drops_the_least_recently_stored(void **state)
{
    gw_cache_t *c = make(30000, 3, 1 << 20);
    char body[64];

    (void)state;
    assert_true(put(c, "a", "1"));
    fake_clock_advance_ms(&fx.clock, 1);
    assert_true(put(c, "b", "2"));
    fake_clock_advance_ms(&fx.clock, 1);
    assert_true(put(c, "c", "3"));
    fake_clock_advance_ms(&fx.clock, 1);
    assert_true(put(c, "a", "1")); /* a is read again: now b is the oldest */
    assert_true(put(c, "d", "4"));
    assert_int_equal(stats(c).entries, 3);
    assert_int_equal(stats(c).evictions, 1);
    assert_false(get(c, "b", body, sizeof body, NULL));
    assert_true(get(c, "a", body, sizeof body, NULL));
    assert_true(get(c, "c", body, sizeof body, NULL));
    assert_true(get(c, "d", body, sizeof body, NULL));
    /* c is the oldest now; a hit does not count as a use (only a fresh
     * answer does), so the one it has just had does not save it */
    assert_true(get(c, "c", body, sizeof body, NULL));
    assert_true(put(c, "e", "5"));
    assert_false(get(c, "c", body, sizeof body, NULL));
    assert_true(get(c, "a", body, sizeof body, NULL));
    assert_int_equal(stats(c).evictions, 2);
}

static void full_by_bytes_evicts_and_large_answers_are_not_kept(void **state)
{
    /* 8 KiB: one answer may take 1 KiB, overhead and key included */
    gw_cache_t *c = make(30000, 1000, 8192);
    char big[1024], body[2048], key[16];

    (void)state;
    memset(big, 'x', sizeof big);
    big[600] = '\0';
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "k%02d", i);
        assert_true(put(c, key, big));
        assert_true(stats(c).bytes <= 8192);
    }
    /* (96 + 3 + 600) each: 11 fit in 8192 */
    assert_int_equal(stats(c).entries, 11);
    assert_int_equal(stats(c).evictions, 9);
    assert_false(get(c, "k08", body, sizeof body, NULL));
    assert_true(get(c, "k09", body, sizeof body, NULL));
    assert_true(get(c, "k19", body, sizeof body, NULL));

    /* over max_bytes / 8: not kept, and the key's older answer goes too,
     * so an outage never gets an answer older than the last one sent */
    big[600] = 'x';
    big[sizeof big - 1] = '\0';
    assert_false(put(c, "k19", big));
    assert_false(get(c, "k19", body, sizeof body, NULL));
    assert_int_equal(stats(c).entries, 10);
    /* exactly max_bytes / 8 is kept */
    big[1024 - GW_CACHE_ENTRY_OVERHEAD - 3] = '\0';
    assert_true(put(c, "k19", big));
    assert_true(get(c, "k19", body, sizeof body, NULL));
}

static void expire_drops_only_what_passed_the_bound(void **state)
{
    gw_cache_t *c = make(1000, 16, 1 << 20);
    char body[64];

    (void)state;
    assert_true(put(c, "old1", "a"));
    assert_true(put(c, "old2", "b"));
    fake_clock_advance_ms(&fx.clock, 600);
    assert_true(put(c, "young", "c"));
    fake_clock_advance_ms(&fx.clock, 400);
    assert_int_equal(gw_cache_expire(c), 0); /* 1000 ms: not past it */
    fake_clock_advance_ms(&fx.clock, 1);
    assert_int_equal(gw_cache_expire(c), 2);
    assert_int_equal(stats(c).entries, 1);
    assert_int_equal(stats(c).expired, 2);
    assert_true(get(c, "young", body, sizeof body, NULL));
    fake_clock_advance_ms(&fx.clock, 600);
    assert_int_equal(gw_cache_expire(c), 1);
    assert_int_equal(stats(c).entries, 0);
    assert_int_equal(stats(c).bytes, 0);
}

/* A hit stays readable while a put replaces its entry, evicts it or expiry
 * drops it (ASan would see a use after free). */
static void a_held_hit_outlives_its_entry(void **state)
{
    gw_cache_t *c = make(1000, 2, 1 << 20);
    gw_cache_hit_t h1, h2, h3;

    (void)state;
    assert_true(put(c, "a", "first"));
    assert_true(gw_cache_get(c, "a", 1, &h1));
    assert_true(put(c, "a", "second")); /* replaced */
    assert_true(gw_cache_get(c, "a", 1, &h2));
    assert_true(put(c, "b", "x"));
    assert_true(put(c, "c", "y")); /* a evicted */
    assert_true(gw_cache_get(c, "c", 1, &h3));
    fake_clock_advance_ms(&fx.clock, 2000);
    assert_int_equal(gw_cache_expire(c), 2); /* b and c dropped */
    assert_int_equal(stats(c).entries, 0);
    assert_memory_equal(h1.body, "first", 5);
    assert_memory_equal(h2.body, "second", 6);
    assert_memory_equal(h3.body, "y", 1);
    gw_cache_release(c, &h1);
    gw_cache_release(c, &h2);
    gw_cache_release(c, &h3);
    assert_null(h1.entry_);
    gw_cache_release(c, &h1); /* a released hit is inert */
}

/* ---- keys ------------------------------------------------------------- */

static const char *key_of(const char *method, const char *path, const char *query)
{
    static char out[GW_CACHE_KEY_MAX + 1];
    size_t n = gw_cache_key(method, strlen(method), path, strlen(path), query,
                            query != NULL ? strlen(query) : 0, out, sizeof out);

    if (n == 0)
        return NULL;
    assert_int_equal(n, strlen(out));
    return out;
}

static void same_key(const char *pa, const char *qa, const char *pb, const char *qb)
{
    char a[GW_CACHE_KEY_MAX + 1];
    const char *k = key_of("GET", pa, qa);

    assert_non_null(k);
    snprintf(a, sizeof a, "%s", k);
    k = key_of("GET", pb, qb);
    assert_non_null(k);
    if (strcmp(a, k) != 0)
        fail_msg("%s?%s and %s?%s: \"%s\" != \"%s\"", pa, qa ? qa : "", pb, qb ? qb : "", a, k);
}

static void other_key(const char *pa, const char *qa, const char *pb, const char *qb)
{
    char a[GW_CACHE_KEY_MAX + 1];
    const char *k = key_of("GET", pa, qa);

    assert_non_null(k);
    snprintf(a, sizeof a, "%s", k);
    k = key_of("GET", pb, qb);
    assert_non_null(k);
    if (strcmp(a, k) == 0)
        fail_msg("%s?%s and %s?%s share the key \"%s\"", pa, qa ? qa : "", pb, qb ? qb : "", a);
}

static void keys_are_normalised(void **state)
{
    (void)state;
    /* the form */
    assert_string_equal(key_of("GET", "/v1/products", NULL), "GET /v1/products");
    assert_string_equal(key_of("GET", "/v1/products", ""), "GET /v1/products");
    assert_string_equal(key_of("GET", "/v1/products", "&&"), "GET /v1/products");
    assert_string_equal(key_of("GET", "/v1/products", "page_size=2&page_token=abc"),
                        "GET /v1/products?page_size=2&page_token=abc");
    /* query: order of names, empty parts, "a" = "a=", '+' = %20, case of
     * escapes, needless escapes */
    same_key("/v1/products", "page_token=x&page_size=2", "/v1/products",
             "page_size=2&page_token=x");
    same_key("/v1/products", "&page_size=2&&", "/v1/products", "page_size=2");
    same_key("/v1/products", "page_token", "/v1/products", "page_token=");
    same_key("/v1/products", "page_token=a+b", "/v1/products", "page_token=a%20b");
    same_key("/v1/products", "page_token=%2f%3d", "/v1/products", "page_token=%2F%3D");
    same_key("/v1/products", "page%5Fsize=%32", "/v1/products", "page_size=2");
    assert_string_equal(key_of("GET", "/v1/products", "q=a b&q=%e2%82%ac"),
                        "GET /v1/products?q=a%20b&q=%E2%82%AC");
    /* path: needless escapes of unreserved characters, case of the others */
    same_key("/v1/products/%61%62", NULL, "/v1/products/ab", NULL);
    same_key("/v1/products/a%2fb", NULL, "/v1/products/a%2Fb", NULL);
    /* ... and what must stay apart */
    other_key("/v1/products/a%2Fb", NULL, "/v1/products/a/b", NULL);
    other_key("/v1/products/a", NULL, "/v1/products/A", NULL);
    other_key("/v1/products", "page_size=2", "/v1/products", "page_size=3");
    other_key("/v1/products", "page_size=2", "/v1/products", "pageSize=2");
    other_key("/v1/products", "a=1&a=2", "/v1/products", "a=2&a=1"); /* a repeated field's order */
    other_key("/v1/products", "a=b%26c", "/v1/products", "a=b&c");
    other_key("/v1/products", "a%3Db=c", "/v1/products", "a=b%3Dc");
    other_key("/v1/products", NULL, "/v1/products/", NULL);
    /* one name's values keep their order when sorted among others */
    assert_string_equal(key_of("GET", "/x", "b=2&a=9&b=1&a=8"), "GET /x?a=9&a=8&b=2&b=1");
    /* the method is part of it */
    assert_string_equal(key_of("HEAD", "/x", NULL), "HEAD /x");
}

static void keys_not_made(void **state)
{
    char q[4096], out[64];
    size_t n = 0;

    (void)state;
    /* a malformed escape in the query: the binder answers 400 anyway */
    assert_null(key_of("GET", "/v1/products", "page_token=%zz"));
    assert_null(key_of("GET", "/v1/products", "page_token=%4"));
    /* ... while in the path it is just bytes */
    assert_string_equal(key_of("GET", "/v1/products/%zz%4", NULL), "GET /v1/products/%zz%4");
    /* more than GW_CACHE_MAX_PARAMS parameters */
    for (int i = 0; i <= GW_CACHE_MAX_PARAMS; i++)
        n += (size_t)snprintf(q + n, sizeof q - n, "p%d=1&", i);
    assert_null(key_of("GET", "/v1/products", q));
    q[n - 6] = '\0'; /* drop the last one: exactly the limit */
    assert_non_null(key_of("GET", "/v1/products", q));
    /* longer than the buffer (or than GW_CACHE_KEY_MAX) */
    memset(q, 'a', sizeof q);
    q[sizeof q - 1] = '\0';
    assert_null(key_of("GET", q, NULL));
    assert_null(key_of("GET", "/v1/products", q));
    assert_int_equal(gw_cache_key("GET", 3, "/0123456789", 11, NULL, 0, out, 16), 15);
    assert_int_equal(gw_cache_key("GET", 3, "/0123456789a", 12, NULL, 0, out, 16), 0);
    assert_int_equal(gw_cache_key("GET", 3, "/", 1, NULL, 0, out, 0), 0);
}

/* ---- when a stale answer may stand in ---------------------------------- */

static rs_grpc_result_t result(svc_err_t err, rs_reason_t reason)
{
    rs_grpc_result_t r;

    memset(&r, 0, sizeof r);
    r.err = err;
    r.reason = reason;
    r.attempts = 1;
    return r;
}

static void only_availability_failures_count(void **state)
{
    static const struct {
        svc_err_t err;
        rs_reason_t reason;
        bool want;
    } cases[] = {
        {SVC_EUNAVAIL, RS_REASON_BREAKER_OPEN, true},
        {SVC_EEXHAUSTED, RS_REASON_BULKHEAD_FULL, true},
        {SVC_EUNAVAIL, RS_REASON_ATTEMPTS_EXHAUSTED, true},
        {SVC_EUNAVAIL, RS_REASON_BUDGET_EXHAUSTED, true},
        {SVC_ETIMEDOUT, RS_REASON_DEADLINE, true},
        {SVC_ETIMEDOUT, RS_REASON_ATTEMPTS_EXHAUSTED, true},
        {SVC_EUNAVAIL, RS_REASON_NOT_RETRYABLE, true}, /* the catalog's database is down */
        {SVC_ENOTFOUND, RS_REASON_NOT_RETRYABLE, false},
        {SVC_EINVAL, RS_REASON_NOT_RETRYABLE, false},
        {SVC_EPRECOND, RS_REASON_NOT_RETRYABLE, false},
        {SVC_EINTERNAL, RS_REASON_NOT_RETRYABLE, false},
        {SVC_EUNKNOWN, RS_REASON_NOT_RETRYABLE, false},
        {SVC_EEXHAUSTED, RS_REASON_PUSHBACK, false}, /* shed: 429 says slow down */
        {SVC_EEXHAUSTED, RS_REASON_ATTEMPTS_EXHAUSTED, false},
        {SVC_ECANCELLED, RS_REASON_CANCELLED, false}, /* the client or the drain */
        {SVC_ETIMEDOUT, RS_REASON_CANCELLED, false},
        {SVC_ENOMEM, RS_REASON_NOT_RETRYABLE, false},
        {SVC_OK, RS_REASON_OK, false},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rs_grpc_result_t r = result(cases[i].err, cases[i].reason);
        if (gw_upstream_unavailable(&r) != cases[i].want)
            fail_msg("%s %s: want %s", svc_err_name(cases[i].err), rs_reason_name(cases[i].reason),
                     cases[i].want ? "unavailable" : "a failure to answer as such");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_and_bad_options),
        cmocka_unit_test_teardown(hit_returns_the_body_and_its_age, teardown),
        cmocka_unit_test_teardown(served_up_to_the_bound_and_not_after, teardown),
        cmocka_unit_test_teardown(a_new_answer_restarts_the_age, teardown),
        cmocka_unit_test_teardown(full_by_entries_drops_the_least_recently_stored, teardown),
        cmocka_unit_test_teardown(full_by_bytes_evicts_and_large_answers_are_not_kept, teardown),
        cmocka_unit_test_teardown(expire_drops_only_what_passed_the_bound, teardown),
        cmocka_unit_test_teardown(a_held_hit_outlives_its_entry, teardown),
        cmocka_unit_test(keys_are_normalised),
        cmocka_unit_test(keys_not_made),
        cmocka_unit_test(only_availability_failures_count),
    };

    return cmocka_run_group_tests_name("gateway_stale_cache", tests, NULL, NULL);
}
