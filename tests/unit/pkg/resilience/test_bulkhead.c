/* SPDX-License-Identifier: Apache-2.0 */
/* test_bulkhead.c - reject at once when full; a slot never leaks. */
#include "rs_test.h"

static void rejects_immediately_when_full(void **state)
{
    rt_t *t = *state;
    rs_call_t a, b, c;
    rs_result_t res;
    uint64_t dl, before;

    t->opts.max_concurrent = 2;
    rt_start(t);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &a), SVC_OK);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &b), SVC_OK);
    before = atomic_load(&t->clock.now_ns);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c), SVC_EEXHAUSTED);
    assert_int_equal(atomic_load(&t->clock.now_ns), before);    /* no queue, no wait */
    assert_int_equal(rs_call_attempt(&c, &dl), SVC_EEXHAUSTED); /* over: no attempt */
    rs_call_finish(&c, &res);
    assert_int_equal(res.reason, RS_REASON_BULKHEAD_FULL);
    assert_int_equal(res.attempts, 0);
    assert_int_equal(rs_upstream_in_flight(t->up), 2);
    rs_call_finish(&a, NULL);
    rs_call_finish(&b, NULL);
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
}

static void run_script(rt_t *t, svc_err_t err, bool timer, uint64_t deadline)
{
    rt_script_t s;
    rs_result_t res;

    rt_script_init(&s, t, err, 1);
    s.outcomes[0].attempt_timer_fired = timer;
    (void)rt_run(t, GET_PRODUCT, deadline, &s, &res);
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
}

static void slots_are_released_on_every_path(void **state)
{
    rt_t *t = *state;
    rs_outcome_t unavail = rt_outcome(SVC_EUNAVAIL);
    rs_call_t c;
    uint64_t dl;

    t->opts.max_concurrent = 1;
    rt_start(t);
    run_script(t, SVC_OK, false, SVC_DEADLINE_NONE);             /* success */
    run_script(t, SVC_ENOTFOUND, false, SVC_DEADLINE_NONE);      /* business error */
    run_script(t, SVC_ETIMEDOUT, true, SVC_DEADLINE_NONE);       /* attempt timeouts */
    run_script(t, SVC_OK, false, atomic_load(&t->clock.now_ns)); /* deadline: no attempt */
    /* cancelled mid-attempt */
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c), SVC_OK);
    assert_int_equal(rs_call_attempt(&c, &dl), SVC_OK);
    rs_call_finish(&c, NULL);
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
    /* while waiting out a backoff no slot is held; the next attempt takes one */
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c), SVC_OK);
    assert_int_equal(rs_call_attempt(&c, &dl), SVC_OK);
    assert_int_equal(rs_upstream_in_flight(t->up), 1);
    assert_int_equal(rs_call_end_attempt(&c, &unavail).action, RS_RETRY);
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
    assert_int_equal(rs_call_attempt(&c, &dl), SVC_OK);
    assert_int_equal(rs_upstream_in_flight(t->up), 1);
    assert_int_equal(rs_call_end_attempt(&c, &unavail).action, RS_RETRY);
    rs_call_finish(&c, NULL); /* cancelled during the backoff */
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
    /* breaker rejection */
    t->opts.breaker.failures = 1;
    rt_stop(t);
    rt_start(t);
    run_script(t, SVC_EUNAVAIL, false, SVC_DEADLINE_NONE);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
    run_script(t, SVC_OK, false, SVC_DEADLINE_NONE);
}

static void full_after_a_backoff_fails_with_the_last_real_error(void **state)
{
    rt_t *t = *state;
    rs_outcome_t unavail = rt_outcome(SVC_EUNAVAIL);
    rs_call_t a, b;
    rs_result_t res;
    uint64_t dl;

    t->opts.max_concurrent = 1;
    rt_start(t);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &a), SVC_OK);
    assert_int_equal(rs_call_attempt(&a, &dl), SVC_OK);
    assert_int_equal(rs_call_end_attempt(&a, &unavail).action, RS_RETRY);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &b), SVC_OK);
    assert_int_equal(rs_call_attempt(&a, &dl), SVC_EUNAVAIL);
    rs_call_finish(&a, &res);
    assert_int_equal(res.reason, RS_REASON_BULKHEAD_FULL);
    assert_int_equal(res.attempts, 1);
    rs_call_finish(&b, NULL);
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
}

static void unlimited_still_counts_in_flight(void **state)
{
    rt_t *t = *state;
    rs_call_t c[3];

    rt_start(t);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c[i]), SVC_OK);
    assert_int_equal(rs_upstream_in_flight(t->up), 3);
    for (int i = 0; i < 3; i++)
        rs_call_finish(&c[i], NULL);
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
}

/* Outermost: a full bulkhead refuses before the breaker can hand out its
 * one trial permit to a call that would not run. */
static void bulkhead_is_checked_before_the_breaker(void **state)
{
    rt_t *t = *state;
    rs_call_t held, trial, c;
    rs_result_t res;

    t->opts.max_concurrent = 2;
    t->opts.policy.max_attempts = 1;
    rt_start(t);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &held), SVC_OK);
    for (int i = 0; i < 5; i++)
        rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
    fake_clock_advance_ms(&t->clock, RS_DEFAULT_BREAKER_COOLDOWN_MS);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &trial), SVC_OK);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c), SVC_EEXHAUSTED);
    rs_call_finish(&c, NULL);
    rs_call_finish(&trial, NULL); /* abandoned: the permit goes back */
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &trial), SVC_OK);
    rs_call_finish(&trial, NULL);
    rs_call_finish(&held, NULL);
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, rt_setup, rt_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(rejects_immediately_when_full),
        T(slots_are_released_on_every_path),
        T(full_after_a_backoff_fails_with_the_last_real_error),
        T(unlimited_still_counts_in_flight),
        T(bulkhead_is_checked_before_the_breaker),
    };

    svc_log_set_level(SVC_LOG_ERROR);
    return cmocka_run_group_tests_name("rs_bulkhead", tests, NULL, NULL);
}
