/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ratelimit_concurrent.c - gateway/ratelimit.c shared by threads, as
 * the gateway's loops share it.
 *
 * One key hammered by THREADS threads while a ticker moves a shared fake
 * time by 1 ms at a time (one token each at 1000/s): the tokens handed out
 * must be exactly burst + one per millisecond, however the checks
 * interleave, with clocks read a little late on some threads. The ticker
 * waits for the threads to spend the bucket down before each tick, so that
 * it never sits full (a full bucket rightly drops what it would gain),
 * and every other tick until one of them has found it empty.
 *
 * Then many keys over a small table: evictions on every shard at once
 * while another thread renders the metrics; the table stays within its
 * bound and the counters add up. Run under ThreadSanitizer by build-tsan
 * (the name has "concurrent").
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ratelimit.h"
#include "support/fake_clock.h"
#include "support/group.h"

#define THREADS 4
#define BURST   50
#define TICKS   2000 /* ms of fake time */
#define T0      (UINT64_C(1) << 40)

static fake_clock_t clk;
static gw_rl_t *rl;
static atomic_bool stop;
static _Atomic uint64_t granted, refused, bad; /* cmocka's asserts are for the main thread */

static uint64_t now(void)
{
    return svc_clock_now(fake_clock_iface(&clk));
}

static void *hammer_one_key(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        gw_rl_decision_t d;
        if (gw_rl_check(rl, 0, "sub:hot", 7, now(), &d) != SVC_OK)
            atomic_fetch_add(&bad, 1);
        if (d.allowed)
            atomic_fetch_add(&granted, 1);
        else
            atomic_fetch_add(&refused, 1);
    }
    return NULL;
}

static gw_rl_t *make(const char *text, size_t capacity, size_t shards)
{
    gw_rl_spec_t spec;
    gw_rl_opts_t o;
    gw_rl_t *r;

    assert_int_equal(gw_rl_spec_parse(text, &spec, SVC_ERRBUF_SCRATCH), SVC_OK);
    gw_rl_opts_init(&o);
    o.spec = &spec;
    o.capacity = capacity;
    o.shards = shards;
    assert_int_equal(gw_rl_new(&o, &r), SVC_OK);
    return r;
}

static void one_key_gets_exactly_burst_plus_rate_times_time(void **state)
{
    pthread_t th[THREADS];
    gw_rl_decision_t d;
    gw_rl_stats_t s;
    uint64_t total, drained = 0;

    (void)state;
    fake_clock_init(&clk, T0);
    rl = make("read=1000/s,burst=50", 1024, 16);
    atomic_store(&stop, false);
    atomic_store(&granted, 0);
    atomic_store(&refused, 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_one_key, NULL), 0);
    for (uint64_t t = 0; t < TICKS; t++) {
        uint64_t seen = atomic_load(&refused);
        /* The level is burst + t - granted: keep it below the burst, and
         * let the threads find it empty (a refusal) between ticks, so
         * that both paths race. */
        while (atomic_load(&granted) + 10 < BURST + t ||
               (t % 2 == 0 && atomic_load(&refused) == seen))
            sched_yield();
        fake_clock_advance_ms(&clk, 1);
    }
    atomic_store(&stop, true);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* What is left at the last instant, taken by this thread. */
    while (gw_rl_check(rl, 0, "sub:hot", 7, now(), &d) == SVC_OK && d.allowed)
        drained++;
    total = atomic_load(&granted) + drained;
    gw_rl_stats(rl, &s);
    print_message("  %llu granted by %d threads, %llu refused, %llu drained at the end\n",
                  (unsigned long long)atomic_load(&granted), THREADS,
                  (unsigned long long)atomic_load(&refused), (unsigned long long)drained);
    assert_int_equal(atomic_load(&bad), 0);
    assert_int_equal(total, BURST + TICKS);
    assert_int_equal(s.allowed[0], total);
    assert_int_equal(s.limited[0], atomic_load(&refused) + 1);
    assert_int_equal(s.buckets, 1);
    gw_rl_free(rl);
    rl = NULL;
}

static void *many_keys(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
    char key[32];

    for (int i = 0; i < 20000; i++) {
        gw_rl_decision_t d;
        size_t n;
        seed = seed * 1103515245u + 12345u;
        n = (size_t)snprintf(key, sizeof key, "ip:10.%u.%u.%u", (seed >> 24) & 1, (seed >> 16) & 15,
                             (seed >> 8) & 15); /* 512 keys, 256 buckets */
        if (gw_rl_check(rl, (seed >> 4) & 1, key, n, now(), &d) != SVC_OK)
            atomic_fetch_add(&bad, 1);
        if ((i & 63) == 0)
            fake_clock_advance_ms(&clk, 1);
    }
    return NULL;
}

static void *render(void *arg)
{
    char buf[4096];
    size_t len;

    (void)arg;
    while (!atomic_load(&stop)) {
        gw_rl_stats_t s;
        if (gw_rl_render(rl, buf, sizeof buf, &len) != SVC_OK)
            atomic_fetch_add(&bad, 1);
        gw_rl_stats(rl, &s);
        if (s.buckets > s.capacity)
            atomic_fetch_add(&bad, 1);
    }
    return NULL;
}

static void many_keys_evict_within_the_bound(void **state)
{
    pthread_t th[THREADS], r;
    gw_rl_stats_t s;

    (void)state;
    fake_clock_init(&clk, T0);
    rl = make("read=10/s;write=1/s,burst=2", 256, 8);
    atomic_store(&stop, false);
    assert_int_equal(pthread_create(&r, NULL, render, NULL), 0);
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, many_keys, (void *)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop, true);
    pthread_join(r, NULL);
    gw_rl_stats(rl, &s);
    print_message("  %llu buckets, %llu full and %llu partial evictions, %llu + %llu limited\n",
                  (unsigned long long)s.buckets, (unsigned long long)s.evictions_full,
                  (unsigned long long)s.evictions_partial, (unsigned long long)s.limited[0],
                  (unsigned long long)s.limited[1]);
    assert_int_equal(atomic_load(&bad), 0);
    assert_int_equal(s.buckets, 256);
    assert_int_equal(s.allowed[0] + s.allowed[1] + s.limited[0] + s.limited[1],
                     (uint64_t)THREADS * 20000);
    assert_true(s.evictions_full + s.evictions_partial > 0);
    gw_rl_free(rl);
    rl = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_key_gets_exactly_burst_plus_rate_times_time),
        cmocka_unit_test(many_keys_evict_within_the_bound),
    };

    return svc_test_run_group_tests_name("gateway_ratelimit_concurrent", tests, NULL, NULL);
}
