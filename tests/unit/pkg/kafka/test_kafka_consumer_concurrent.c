/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_kafka_consumer_concurrent.c - the consumer's stats read by another
 * thread (an admin thread rendering /metrics) while the loop's thread bumps
 * them: no data race (run under TSan by `stack.sh test`), and every snapshot
 * is a valid Prometheus histogram (cumulative buckets that never decrease
 * and never exceed the count). The consumer is a bare struct with its stats
 * only: no librdkafka handle, no broker.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "consumer_state.h"

#define SAMPLES 200000
#define CHUNKS  8

typedef struct {
    kfk_consumer_t *c;
    atomic_uint reads; /* snapshots the reader has taken so far */
} race_t;

/*
 * Writes SAMPLES samples in CHUNKS chunks and, before each chunk, waits
 * until the reader has taken one more snapshot. On a busy 2-core machine
 * the writer could otherwise finish before the reader is ever scheduled
 * (a CI run did), and nothing would have been read while being written.
 * The reader never waits, so its snapshots still land mid-chunk.
 */
static void *writer(void *arg)
{
    race_t *r = arg;

    for (uint64_t i = 0; i < SAMPLES; i++) {
        if (i % (SAMPLES / CHUNKS) == 0) {
            unsigned seen = atomic_load(&r->reads);
            while (atomic_load(&r->reads) == seen)
                sched_yield();
        }
        /* 0.5 ms .. 6 s, spread over every bucket and +Inf */
        uint64_t us = 500 + (i * 7919) % 6000000;
        kfk__stats_latency(&r->c->st, us * SVC_NS_PER_US);
        atomic_fetch_add(&r->c->st.handled, 1);
    }
    return NULL;
}

static void check(const kfk_consumer_stats_t *s)
{
    for (size_t i = 0; i + 1 < KFK_LATENCY_BUCKETS; i++)
        if (s->latency_le[i] > s->latency_le[i + 1])
            fail_msg("bucket %zu (%llu) > bucket %zu (%llu)", i,
                     (unsigned long long)s->latency_le[i], i + 1,
                     (unsigned long long)s->latency_le[i + 1]);
    if (s->latency_le[KFK_LATENCY_BUCKETS - 1] > s->latency_count)
        fail_msg("last bucket %llu > count %llu",
                 (unsigned long long)s->latency_le[KFK_LATENCY_BUCKETS - 1],
                 (unsigned long long)s->latency_count);
}

static void stats_read_while_written(void **state)
{
    kfk_consumer_t *c = calloc(1, sizeof *c);
    kfk_consumer_stats_t s;
    pthread_t w;
    char page[8192];
    race_t r = {.c = c};

    assert_non_null(c);
    kfk__stats_init(&c->st);
    atomic_init(&r.reads, 0);
    assert_int_equal(pthread_create(&w, NULL, writer, &r), 0);
    do {
        kfk_consumer_stats(c, &s);
        check(&s);
        (void)kfk_consumer_metrics(c, "t", page, sizeof page);
        atomic_fetch_add(&r.reads, 1);
    } while (s.latency_count < SAMPLES);
    assert_int_equal(pthread_join(w, NULL), 0);
    kfk_consumer_stats(c, &s);
    check(&s);
    assert_int_equal(s.latency_count, SAMPLES);
    assert_int_equal(s.handled, SAMPLES);
    assert_true(s.latency_le[0] > 0 && s.latency_le[KFK_LATENCY_BUCKETS - 1] < SAMPLES);
    assert_non_null(strstr(page, "t_handler_seconds_bucket{le=\"+Inf\"}"));
    /* one snapshot released each chunk, one more saw the last sample */
    assert_true(atomic_load(&r.reads) > CHUNKS);
    kfk__stats_dispose(&c->st);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stats_read_while_written),
    };
    return cmocka_run_group_tests_name("kfk_consumer_concurrent", tests, NULL, NULL);
}
