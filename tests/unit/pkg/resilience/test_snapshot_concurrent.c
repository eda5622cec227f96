/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_snapshot_concurrent.c - the live page's journal shared by threads:
 * two threads record decisions (runs of alike ones, folded lock-free, and
 * now and then a transition) while a third renders the feed again and again. Every document must be whole, its
 * decisions in order, and in the end every decision is either recorded or
 * counted as dropped. Run it under -DSVC_SANITIZE=thread too.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "rs_test.h"
#include "support/worker_check.h"

#define RECORDERS        2
#define CALLS            3000 /* each recorder, at least ... */
#define MIN_RENDERS      50   /* ... and until the renderer has done this many */
#define TRANSITION_EVERY 100

typedef struct shared {
    rt_t *t;
    pthread_barrier_t start;
    _Atomic int recording;
    _Atomic unsigned renders;
    _Atomic uint64_t calls, transitions;
    worker_check_t check;
} shared_t;

static void *recorder(void *arg)
{
    shared_t *x = arg;
    rs_result_t res;

    pthread_barrier_wait(&x->start);
    for (int i = 0; i < CALLS || atomic_load(&x->renders) < MIN_RENDERS; i++) {
        /* Not idempotent: one give-up each. Runs of 64 alike are folded
         * lock-free, broken by the other thread's runs and by the method
         * changing: folds and new records race each other. */
        rt_call(x->t, (i / 64) % 2 ? CREATE_ORDER : CREATE_PRODUCT, SVC_EUNAVAIL, &res);
        atomic_fetch_add(&x->calls, 1);
        if (i % TRANSITION_EVERY == 0) {
            rs__journal_transition(&x->t->up->journal, RS_BREAKER_CLOSED, RS_BREAKER_OPEN,
                                   "from the test", svc_now_ns());
            atomic_fetch_add(&x->transitions, 1);
        }
    }
    atomic_fetch_sub(&x->recording, 1);
    return NULL;
}

static uint64_t number_after(const char *doc, const char *key)
{
    const char *p = strstr(doc, key);
    uint64_t v = 0;

    assert_non_null(p);
    assert_int_equal(sscanf(p + strlen(key), "%" SCNu64, &v), 1);
    return v;
}

/* A whole document, and its decisions' seq strictly increasing: NULL, or
 * what is wrong. Called on the renderer thread too, so it asserts nothing. */
static const char *document_error(const char *doc, size_t len)
{
    uint64_t last = 0;

    if (strlen(doc) != len)
        return "the length returned is not the document's";
    if (len < 14 || memcmp(doc, "{\"now_ms\":", 10) != 0 || strcmp(doc + len - 4, "]}]}") != 0)
        return "the document is not whole";
    for (const char *p = strstr(doc, "\"decisions\":["); p != NULL;
         p = strstr(p + 1, "{\"seq\":")) {
        uint64_t seq;
        if (sscanf(p, "{\"seq\":%" SCNu64, &seq) != 1)
            continue;
        if (seq <= last)
            return "a decision's seq is not above the one before it";
        last = seq;
    }
    return NULL;
}

static void check_document(const char *doc, size_t len)
{
    const char *e = document_error(doc, len);

    if (e != NULL)
        fail_msg("%s: %.200s", e, doc);
}

static void *renderer(void *arg)
{
    shared_t *x = arg;
    static char buf[1 << 16];
    size_t len;

    pthread_barrier_wait(&x->start);
    while (atomic_load(&x->recording) > 0) {
        WORKER_CHECK(&x->check, rs_snapshot_json(&x->t->up, 1, buf, sizeof buf, &len) == SVC_OK);
        WORKER_CHECK(&x->check, document_error(buf, len) == NULL);
        atomic_fetch_add(&x->renders, 1);
    }
    return NULL;
}

static void recording_while_rendering(void **state)
{
    rt_t *t = *state;
    shared_t x = {.t = t, .recording = RECORDERS};
    pthread_t th[RECORDERS + 1];
    static char buf[1 << 16];
    uint64_t total, dropped;
    size_t len;

    t->opts.breaker.failures = 0; /* never opens: every call is a give-up */
    t->opts.on_transition = NULL;
    rt_start(t);
    pthread_barrier_init(&x.start, NULL, RECORDERS + 1);
    for (int i = 0; i < RECORDERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, recorder, &x), 0);
    assert_int_equal(pthread_create(&th[RECORDERS], NULL, renderer, &x), 0);
    for (int i = 0; i <= RECORDERS; i++)
        pthread_join(th[i], NULL);
    worker_check_assert(&x.check);
    pthread_barrier_destroy(&x.start);
    assert_int_equal(rs_snapshot_json(&t->up, 1, buf, sizeof buf, &len), SVC_OK);
    check_document(buf, len);
    total = number_after(buf, "\"decisions_total\":");
    dropped = number_after(buf, "\"decisions_dropped\":");
    /* Folded or not, every decision is counted once: recorded or dropped. */
    assert_int_equal(total + dropped, atomic_load(&x.calls));
    /* Transitions always go in, whoever holds the lock. */
    assert_int_equal(number_after(buf, "\"transitions_total\":"), atomic_load(&x.transitions));
    assert_true(atomic_load(&x.renders) >= MIN_RENDERS);
    print_message("%u renders, %" PRIu64 " of %" PRIu64 " decisions dropped\n",
                  atomic_load(&x.renders), dropped, atomic_load(&x.calls));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(recording_while_rendering, rt_setup, rt_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
