/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_stale_cache_concurrent.c - gateway/stale_cache.c shared by threads,
 * as the gateway's loops share it: puts of new and repeated answers, hits
 * held while others replace, evict and expire their entries, the main
 * thread's expiry and the metrics' stats, all at once. Every hit must be an
 * answer that was stored for its key, whole, and the counts must add up at
 * the end. Run under ThreadSanitizer by build-tsan (the name has
 * "concurrent").
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "stale_cache.h"
#include "support/fake_clock.h"

#define THREADS 4
#define ROUNDS  20000
#define KEYS    64 /* more than the cache holds: evictions all the time */

static fake_clock_t clk;
static gw_cache_t *cache;
static atomic_bool stop;
static _Atomic uint64_t hits, bad;

/* Body of version v of key k: "k=<k> v=<v> " then filler up to a length
 * that depends on both, then a checksum of it all, so that a torn or mixed
 * body is seen. */
static size_t body_of(int k, uint32_t v, char *out, size_t cap)
{
    int n = snprintf(out, cap, "k=%d v=%u ", k, v);
    size_t len = (size_t)n + (size_t)((k * 7 + (int)(v % 13)) % 150) * 5, sum = 0;

    for (size_t i = (size_t)n; i < len; i++)
        out[i] = (char)('a' + (i + v) % 26);
    for (size_t i = 0; i < len; i++)
        sum += (unsigned char)out[i];
    n = snprintf(out + len, cap - len, "|%zu", sum);
    return len + (size_t)n;
}

static bool body_ok(int k, const char *b, size_t len)
{
    char want[1024], head[32];
    unsigned kk, v;

    /* A cached body is len bytes, not a C string: sscanf gets a
     * NUL-terminated copy of its head (it read past the end before). */
    if (len == 0 || len >= sizeof want)
        return false;
    snprintf(head, sizeof head, "%.*s", (int)(len < sizeof head - 1 ? len : sizeof head - 1), b);
    if (sscanf(head, "k=%u v=%u ", &kk, &v) != 2 || (int)kk != k)
        return false;
    return body_of(k, v, want, sizeof want) == len && memcmp(want, b, len) == 0;
}

static void *worker(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
    char key[32], body[1024];

    for (int i = 0; i < ROUNDS; i++) {
        int k;
        uint32_t v;
        size_t klen, blen;
        gw_cache_hit_t hit;

        seed = seed * 1103515245u + 12345u;
        k = (int)((seed >> 8) % KEYS);
        v = (seed >> 20) % 4; /* few versions: identical answers (refresh) are common */
        klen = (size_t)snprintf(key, sizeof key, "GET /v1/products/%d", k);
        if ((seed >> 4) % 3 == 0) {
            blen = body_of(k, v, body, sizeof body);
            (void)gw_cache_put(cache, key, klen, body, blen);
            continue;
        }
        if (!gw_cache_get(cache, key, klen, &hit))
            continue;
        atomic_fetch_add(&hits, 1);
        /* Held a while: others replace and evict this entry meanwhile. */
        for (int spin = 0; spin < 50; spin++)
            atomic_signal_fence(memory_order_seq_cst);
        if (!body_ok(k, hit.body, hit.len))
            atomic_fetch_add(&bad, 1);
        gw_cache_release(cache, &hit);
    }
    return NULL;
}

/* The main thread's part: time goes by, expiry runs, /metrics reads stats. */
static void *ticker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        gw_cache_stats_t s;
        fake_clock_advance_ms(&clk, 3);
        gw_cache_expire(cache);
        gw_cache_stats(cache, &s);
        if (s.entries > 16 || s.bytes > 16384)
            atomic_fetch_add(&bad, 1);
    }
    return NULL;
}

static void threads_share_one_cache(void **state)
{
    pthread_t w[THREADS], t;
    gw_cache_opts_t o;
    gw_cache_stats_t s;

    (void)state;
    fake_clock_init(&clk, UINT64_C(1) << 40);
    gw_cache_opts_init(&o);
    o.max_age_ms = 50;
    o.max_entries = 16;
    o.max_bytes = 16384;
    o.clock = fake_clock_iface(&clk);
    assert_int_equal(gw_cache_new(&o, &cache), SVC_OK);
    atomic_store(&stop, false);
    assert_int_equal(pthread_create(&t, NULL, ticker, NULL), 0);
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&w[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(w[i], NULL);
    atomic_store(&stop, true);
    pthread_join(t, NULL);

    gw_cache_stats(cache, &s);
    print_message("  %llu hits, %llu entries, %llu evictions, %llu expired\n",
                  (unsigned long long)atomic_load(&hits), (unsigned long long)s.entries,
                  (unsigned long long)s.evictions, (unsigned long long)s.expired);
    assert_int_equal(atomic_load(&bad), 0);
    assert_true(atomic_load(&hits) > 0);
    assert_true(s.evictions > 0);
    assert_true(s.entries <= 16 && s.bytes <= 16384);
    /* everything left expires, and the bytes come back to 0 */
    fake_clock_advance_ms(&clk, 51);
    assert_int_equal(gw_cache_expire(cache), s.entries);
    gw_cache_stats(cache, &s);
    assert_int_equal(s.entries, 0);
    assert_int_equal(s.bytes, 0);
    gw_cache_free(cache);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_share_one_cache),
    };

    return cmocka_run_group_tests_name("gateway_stale_cache_concurrent", tests, NULL, NULL);
}
