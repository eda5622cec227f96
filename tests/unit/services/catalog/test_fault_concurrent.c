/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fault_concurrent.c - the catalog's test-only fault knobs
 * (services/catalog/fault.c): the slot limit, and the queue that makes a
 * backlog (first come first served, bounded, released when the limit is
 * lifted). Threads really contend; also run under ThreadSanitizer.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "support/scale.h"

typedef struct caller {
    cat_fault_t *f;
    svc_err_t err;
    atomic_int *seq; /* admission order, shared */
    int admitted_as; /* this caller's place in it */
    pthread_t t;
} caller_t;

static void *call(void *arg)
{
    caller_t *c = arg;
    cat_fault_pass_t pass;
    char errbuf[SVC_ERRBUF_LEN];

    c->err = cat_fault_enter(c->f, NULL, &pass, errbuf);
    c->admitted_as = atomic_fetch_add(c->seq, 1);
    cat_fault_leave(c->f, &pass);
    return NULL;
}

static void set(cat_fault_t *f, uint32_t latency, uint32_t slots, uint32_t queue)
{
    cat_fault_settings_t s = {latency, slots, 0, 0, queue};
    char errbuf[SVC_ERRBUF_LEN];

    assert_int_equal(cat_fault_set(f, &s, errbuf), SVC_OK);
}

/* Until the counters say want_held/want_queued (or fail after 10 s). */
static void await(cat_fault_t *f, int64_t want_held, int64_t want_queued)
{
    cat_fault_counts_t c;

    for (int i = 0; i < 10000; i++) {
        cat_fault_counts(f, &c);
        if (c.held == want_held && c.queued == want_queued)
            return;
        usleep(1000);
    }
    fail_msg("held %lld queued %lld, want %lld %lld", (long long)c.held, (long long)c.queued,
             (long long)want_held, (long long)want_queued);
}

static void start(caller_t *c, cat_fault_t *f, atomic_int *seq)
{
    c->f = f;
    c->seq = seq;
    assert_int_equal(pthread_create(&c->t, NULL, call, c), 0);
}

static void ranges_are_checked(void **state)
{
    cat_fault_t *f = NULL;
    cat_fault_settings_t s = {0, 0, 0, 0, CAT_FAULT_MAX_QUEUE + 1}, got;
    char errbuf[SVC_ERRBUF_LEN] = "";

    (void)state;
    assert_int_equal(cat_fault_new(&f), SVC_OK);
    assert_int_equal(cat_fault_set(f, &s, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "queue"));
    s.queue = 0;
    s.error_pct = 101;
    assert_int_equal(cat_fault_set(f, &s, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "error_pct"));
    cat_fault_get(f, &got);
    assert_int_equal(got.error_pct, 0); /* nothing changed */
    cat_fault_free(f);
}

/* Without a queue, a call that finds every slot taken is refused at once. */
static void no_queue_rejects_at_once(void **state)
{
    cat_fault_t *f = NULL;
    atomic_int seq = 0;
    caller_t holder = {0};
    cat_fault_pass_t pass;
    cat_fault_counts_t c;
    char errbuf[SVC_ERRBUF_LEN] = "";

    (void)state;
    assert_int_equal(cat_fault_new(&f), SVC_OK);
    set(f, (uint32_t)svc_test_ms(300), 1, 0); /* held while the main thread is refused */
    start(&holder, f, &seq);
    await(f, 1, 0);
    assert_int_equal(cat_fault_enter(f, NULL, &pass, errbuf), SVC_EEXHAUSTED);
    assert_non_null(strstr(errbuf, "slots busy"));
    cat_fault_leave(f, &pass);
    pthread_join(holder.t, NULL);
    assert_int_equal(holder.err, SVC_OK);
    cat_fault_counts(f, &c);
    assert_int_equal(c.rejected, 1);
    assert_int_equal(c.calls, 2);
    assert_int_equal(c.in_flight, 0);
    cat_fault_free(f);
}

/* One slot, a queue of two: the second and third callers wait and are served
 * in the order they came; the fourth finds the queue full and is refused. */
static void queue_is_fifo_and_bounded(void **state)
{
    cat_fault_t *f = NULL;
    atomic_int seq = 0;
    caller_t c[3] = {{0}};
    cat_fault_pass_t pass;
    cat_fault_counts_t n;
    char errbuf[SVC_ERRBUF_LEN] = "";

    (void)state;
    assert_int_equal(cat_fault_new(&f), SVC_OK);
    set(f, (uint32_t)svc_test_ms(50), 1, 2); /* held while two queue and one is refused */
    start(&c[0], f, &seq);
    await(f, 1, 0);
    start(&c[1], f, &seq);
    await(f, 1, 1);
    start(&c[2], f, &seq);
    await(f, 1, 2);
    assert_int_equal(cat_fault_enter(f, NULL, &pass, errbuf), SVC_EEXHAUSTED);
    cat_fault_leave(f, &pass);
    for (int i = 0; i < 3; i++) {
        pthread_join(c[i].t, NULL);
        assert_int_equal(c[i].err, SVC_OK);
        assert_int_equal(c[i].admitted_as, i);
    }
    cat_fault_counts(f, &n);
    assert_int_equal(n.rejected, 1);
    assert_int_equal(n.in_flight, 0);
    assert_int_equal(n.held, 0);
    assert_int_equal(n.queued, 0);
    cat_fault_free(f);
}

/* Turning the limit off releases the waiters at once, while the slot's
 * holder is still busy: nobody stays stuck behind a knob that is gone. */
static void lifting_the_limit_releases_waiters(void **state)
{
    cat_fault_t *f = NULL;
    atomic_int seq = 0;
    caller_t holder = {0}, waiter = {0};
    cat_fault_counts_t n;

    (void)state;
    assert_int_equal(cat_fault_new(&f), SVC_OK);
    set(f, 2000, 1, 4);
    start(&holder, f, &seq);
    await(f, 1, 0);
    start(&waiter, f, &seq);
    await(f, 1, 1);
    set(f, 0, 0, 0);
    pthread_join(waiter.t, NULL);
    assert_int_equal(waiter.err, SVC_OK);
    assert_int_equal(waiter.admitted_as, 0); /* before the holder's 2 s were up */
    cat_fault_counts(f, &n);
    assert_int_equal(n.held, 1);
    pthread_join(holder.t, NULL);
    cat_fault_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ranges_are_checked),
        cmocka_unit_test(no_queue_rejects_at_once),
        cmocka_unit_test(queue_is_fifo_and_bounded),
        cmocka_unit_test(lifting_the_limit_releases_waiters),
    };

    return cmocka_run_group_tests_name("catalog_fault", tests, NULL, NULL);
}
