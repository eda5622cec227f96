/* SPDX-License-Identifier: Apache-2.0 */
/* test_timeout.c - per-attempt deadlines, the caller's deadline, and the
 * order of the chain: breaker -> retry -> timeout. */
#include "rs_test.h"

static int setup(void **state)
{
    int rc = rt_setup(state);

    if (rc == 0)
        ((rt_t *)*state)->opts.policy.jitter = RS_JITTER_NONE; /* exact sleeps */
    return rc;
}

static uint64_t now(rt_t *t)
{
    return atomic_load(&t->clock.now_ns);
}

static uint64_t first_deadline(rt_t *t, uint64_t overall)
{
    rs_call_t c;
    uint64_t dl = 0;

    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, overall, &c), SVC_OK);
    assert_int_equal(rs_call_attempt(&c, &dl), SVC_OK);
    rs_call_finish(&c, NULL);
    return dl;
}

static void attempt_deadline_is_min_of_timeout_and_overall(void **state)
{
    rt_t *t = *state;

    rt_start(t);
    assert_int_equal(first_deadline(t, SVC_DEADLINE_NONE), now(t) + MS(3000));
    assert_int_equal(first_deadline(t, now(t) + MS(10000)), now(t) + MS(3000));
    /* An earlier caller deadline always wins. */
    assert_int_equal(first_deadline(t, now(t) + MS(1000)), now(t) + MS(1000));
}

static void no_per_attempt_timeout(void **state)
{
    rt_t *t = *state;

    t->opts.policy.attempt_timeout_ms = RS_TIMEOUT_NONE;
    rt_start(t);
    assert_int_equal(first_deadline(t, now(t) + MS(7000)), now(t) + MS(7000));
    assert_int_equal(first_deadline(t, SVC_DEADLINE_NONE), SVC_DEADLINE_NONE);
}

static void caller_deadline_caps_a_later_attempt(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;
    uint64_t t0;

    rt_start(t);
    t0 = now(t);
    rt_script_init(&s, t, SVC_ETIMEDOUT, 1);
    s.outcomes[0].attempt_timer_fired = true;
    assert_int_equal(rt_run(t, GET_PRODUCT, t0 + MS(4000), &s, &res), SVC_ETIMEDOUT);
    assert_int_equal(s.calls, 2);
    assert_int_equal(s.deadline_ns[0], t0 + MS(3000)); /* its own timer, retried */
    assert_int_equal(s.start_ns[1], t0 + MS(3100));    /* after a 100 ms backoff */
    assert_int_equal(s.deadline_ns[1], t0 + MS(4000)); /* the caller's, not +3 s */
    assert_int_equal(res.reason, RS_REASON_DEADLINE);  /* the caller's ran out */
}

static void worst_case_without_caller_deadline(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;
    uint64_t t0;

    rt_start(t);
    t0 = now(t);
    rt_script_init(&s, t, SVC_ETIMEDOUT, 1);
    s.outcomes[0].attempt_timer_fired = true;
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_ETIMEDOUT);
    assert_int_equal(res.reason, RS_REASON_ATTEMPTS_EXHAUSTED);
    /* attempts x per-attempt timeout + the backoffs: 3 x 3 s + 100 + 200 ms */
    assert_int_equal(now(t) - t0, MS(3 * 3000 + 100 + 200));
}

static void no_attempt_without_time_for_one(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    rt_start(t);
    rt_script_init(&s, t, SVC_OK, 1);
    assert_int_equal(rt_run(t, GET_PRODUCT, now(t) - 1, &s, &res), SVC_ETIMEDOUT);
    assert_int_equal(res.reason, RS_REASON_DEADLINE);
    assert_int_equal(res.attempts, 0);
    assert_int_equal(rt_run(t, GET_PRODUCT, now(t) + MS(RS_DEFAULT_MIN_ATTEMPT_MS) - 1, &s, &res),
                     SVC_ETIMEDOUT);
    assert_int_equal(rt_run(t, GET_PRODUCT, now(t) + MS(RS_DEFAULT_MIN_ATTEMPT_MS), &s, &res),
                     SVC_OK);
    assert_int_equal(s.calls, 1);
}

/*
 * The chain is breaker -> retry -> timeout, outermost first:
 *  - breaker outside retry: an open breaker means no attempt and no retry,
 *    and a call of three failed attempts is one breaker failure;
 *  - retry outside timeout: every attempt gets a fresh deadline of its own.
 */
static void chain_order_breaker_retry_timeout(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    t->opts.breaker.failures = 2;
    rt_start(t);
    rt_script_init(&s, t, SVC_ETIMEDOUT, 1);
    s.outcomes[0].attempt_timer_fired = true;
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_ETIMEDOUT);
    assert_int_equal(s.calls, 3);
    for (size_t i = 0; i < s.calls; i++) /* timeout inside retry */
        assert_int_equal(s.deadline_ns[i] - s.start_ns[i], MS(3000));
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED); /* 1 failure */
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_ETIMEDOUT);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
    rt_script_init(&s, t, SVC_ETIMEDOUT, 1);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(s.calls, 0); /* breaker outside retry and timeout */
    assert_int_equal(res.reason, RS_REASON_BREAKER_OPEN);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, rt_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(attempt_deadline_is_min_of_timeout_and_overall),
        T(no_per_attempt_timeout),
        T(caller_deadline_caps_a_later_attempt),
        T(worst_case_without_caller_deadline),
        T(no_attempt_without_time_for_one),
        T(chain_order_breaker_retry_timeout),
    };

    svc_log_set_level(SVC_LOG_ERROR);
    return cmocka_run_group_tests_name("rs_timeout", tests, NULL, NULL);
}
