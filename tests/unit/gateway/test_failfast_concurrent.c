/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_failfast_concurrent.c - the fail-fast windows shared by threads, as
 * the gateway shares them: loop threads admit calls of one route while
 * another thread reports refusals and the probes' ends, and /metrics
 * renders. Checks that every admit is answered and counted once (a late
 * refusal starts a new window, so "one probe at a time" holds per window,
 * which test_failfast.c checks on a driven clock); under ThreadSanitizer
 * (build-tsan) that the state is only touched under its lock or atomically.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "failfast.h"
#include "support/worker_check.h"

#define LOOPS     3
#define ADMITS    20000
#define MS        SVC_NS_PER_MS
#define LEASE_FAR (UINT64_C(1) << 62) /* probes are never given up here */

static const gw_route_t routes[] = {
    {.method = "POST", .pattern = "/v1/orders", .rpc = "/o/CreateOrder"},
};

typedef struct shared {
    gw_failfast_t *ff;
    _Atomic uint64_t now; /* the clock, advanced by the reporter */
    _Atomic uint64_t passed, refused, probed;
    _Atomic bool stop;
    worker_check_t check;
} shared_t;

static rs_grpc_result_t refusal(void)
{
    rs_grpc_result_t r = {.err = SVC_EUNAVAIL,
                          .message = "catalog unavailable: circuit open",
                          .reason = RS_REASON_NOT_RETRYABLE,
                          .attempts = 1,
                          .retry_after_ms = 50};
    return r;
}

/* A loop thread: admits calls; a probe ends at once, refused or placed. */
static void *loop_main(void *arg)
{
    shared_t *s = arg;
    rs_grpc_result_t res, ok = {.err = SVC_OK, .reason = RS_REASON_OK, .attempts = 1},
                          no = refusal();

    for (int i = 0; i < ADMITS; i++) {
        uint64_t ticket, now = atomic_fetch_add(&s->now, MS); /* time goes by per call */

        switch (gw_failfast_admit(s->ff, 0, now, LEASE_FAR, &ticket, &res)) {
        case GW_FAILFAST_PASS:
            atomic_fetch_add(&s->passed, 1);
            break;
        case GW_FAILFAST_REFUSE:
            WORKER_CHECK(&s->check, res.err == SVC_EUNAVAIL);
            WORKER_CHECK(&s->check, res.retry_after_ms >= 1);
            atomic_fetch_add(&s->refused, 1);
            break;
        case GW_FAILFAST_PROBE:
            atomic_fetch_add(&s->probed, 1);
            gw_failfast_end(s->ff, 0, ticket, i % 2 == 0 ? &no : &ok, now);
            break;
        }
    }
    return NULL;
}

/* The resilience client's thread: late refusals of ordinary calls, and the
 * clock; also renders the metrics now and then, as /metrics does. */
static void *reporter_main(void *arg)
{
    shared_t *s = arg;
    rs_grpc_result_t no = refusal();
    char buf[2048];

    for (unsigned i = 0; !atomic_load(&s->stop); i++) {
        atomic_fetch_add(&s->now, 10 * MS);
        if (i % 7 == 0)
            gw_failfast_end(s->ff, 0, 0, &no, atomic_load(&s->now));
        if (i % 50 == 0)
            WORKER_CHECK(&s->check, gw_failfast_render(s->ff, buf, sizeof buf, NULL) == SVC_OK);
    }
    return NULL;
}

static void loops_and_reporter_share_one_route(void **state)
{
    gw_failfast_opts_t o;
    shared_t s;
    pthread_t loops[LOOPS], reporter;
    char buf[2048];
    unsigned long long answers = 0;
    const char *p;

    (void)state;
    memset(&s, 0, sizeof s);
    atomic_store(&s.now, 1000 * MS);
    gw_failfast_opts_init(&o);
    o.routes = routes;
    o.n_routes = SVC_COUNTOF(routes);
    assert_int_equal(gw_failfast_new(&o, &s.ff), SVC_OK);
    /* A first refusal before any thread runs: otherwise, on a busy machine,
     * the loops could finish their admits before the reporter is ever
     * scheduled, with no window to refuse in (seen once under ASan in CI). */
    rs_grpc_result_t first = refusal();
    gw_failfast_end(s.ff, 0, 0, &first, atomic_load(&s.now));
    assert_int_equal(pthread_create(&reporter, NULL, reporter_main, &s), 0);
    for (int i = 0; i < LOOPS; i++)
        assert_int_equal(pthread_create(&loops[i], NULL, loop_main, &s), 0);
    for (int i = 0; i < LOOPS; i++)
        pthread_join(loops[i], NULL);
    atomic_store(&s.stop, true);
    pthread_join(reporter, NULL);
    worker_check_assert(&s.check);

    print_message("  %d admits: %llu passed, %llu refused, %llu probes\n", LOOPS * ADMITS,
                  (unsigned long long)s.passed, (unsigned long long)s.refused,
                  (unsigned long long)s.probed);
    assert_int_equal(s.passed + s.refused + s.probed, (uint64_t)LOOPS * ADMITS);
    assert_true(s.refused > 0 && s.probed > 0);
    assert_int_equal(gw_failfast_render(s.ff, buf, sizeof buf, NULL), SVC_OK);
    p = strstr(buf, "gateway_failfast_answers_total{route=\"/v1/orders\",method=\"POST\"} ");
    assert_non_null(p);
    answers = strtoull(strchr(p, '}') + 2, NULL, 10);
    assert_int_equal(answers, s.refused);
    gw_failfast_free(s.ff);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loops_and_reporter_share_one_route),
    };
    return cmocka_run_group_tests_name("gateway_failfast_concurrent", tests, NULL, NULL);
}
