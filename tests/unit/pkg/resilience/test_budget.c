/* SPDX-License-Identifier: Apache-2.0 */
/* test_budget.c - the retry budget turns a retry storm into ~10% more load. */
#include "internal.h"
#include "rs_test.h"

/* The budget alone: the breaker would stop this outage after 5 calls. */
static int setup(void **state)
{
    int rc = rt_setup(state);

    if (rc == 0) {
        rt_t *t = *state;
        t->opts.breaker.failures = 0;
        t->random_value = 0; /* full jitter draws 0 ms: the outage fits in one window */
    }
    return rc;
}

static size_t outage(rt_t *t, unsigned calls, unsigned *denied_by_budget)
{
    rt_script_t s;
    rs_result_t res;

    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    *denied_by_budget = 0;
    for (unsigned i = 0; i < calls; i++) {
        assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
        if (res.reason == RS_REASON_BUDGET_EXHAUSTED)
            (*denied_by_budget)++;
    }
    return s.calls; /* attempts that reached the transport */
}

static void full_outage_attempts_stay_within_budget(void **state)
{
    rt_t *t = *state;
    const unsigned originals = 1000;
    const uint64_t floor = RS_DEFAULT_BUDGET_MIN_PER_SEC * RS_DEFAULT_BUDGET_WINDOW_MS / 1000;
    unsigned denied;
    size_t attempts;

    rt_start(t);
    attempts = outage(t, originals, &denied);
    print_message("1000 calls in a full outage: %zu attempts, %u calls denied a retry\n", attempts,
                  denied);
    /* The storm is capped at 1.1x + floor instead of 3x ... */
    assert_true(attempts <= originals + originals / 10 + floor);
    /* ... and the budget was really spent, not just refused. */
    assert_true(attempts >= originals + originals / 10 + floor - 10);
    assert_true(denied > 0);
}

static void without_a_budget_the_storm_is_3x(void **state)
{
    rt_t *t = *state;
    unsigned denied;

    t->opts.budget.window_ms = 0;
    rt_start(t);
    assert_int_equal(outage(t, 1000, &denied), 3000);
    assert_int_equal(denied, 0);
}

static void budget_refills_as_the_window_slides(void **state)
{
    rt_t *t = *state;
    unsigned denied;
    uint64_t now;

    rt_start(t);
    (void)outage(t, 1000, &denied);
    now = atomic_load(&t->clock.now_ns);
    assert_true(rs__budget_remaining(&t->up->budget, now) < 5);
    fake_clock_advance_ms(&t->clock, RS_DEFAULT_BUDGET_WINDOW_MS + 1000);
    now = atomic_load(&t->clock.now_ns);
    assert_int_equal(rs__budget_remaining(&t->up->budget, now), 100); /* the floor again */
}

static void ratio_plus_floor_arithmetic(void **state)
{
    rs_budget_opts_t o = {10, 10, 10000};
    rs__budget_t b;
    const uint64_t t0 = RT_START_NS;

    (void)state;
    assert_int_equal(rs__budget_init(&b, &o), SVC_OK);
    assert_int_equal(rs__budget_remaining(&b, t0), 100); /* a quiet upstream: the floor */
    for (int i = 0; i < 1000; i++)
        rs__budget_deposit(&b, t0);
    assert_int_equal(rs__budget_remaining(&b, t0), 200);
    for (int i = 0; i < 200; i++)
        assert_true(rs__budget_withdraw(&b, t0));
    assert_false(rs__budget_withdraw(&b, t0));
    assert_int_equal(rs__budget_remaining(&b, t0), 0);
    /* Half the window later the same buckets still count; a full window later
     * nothing does. */
    assert_false(rs__budget_withdraw(&b, t0 + MS(5000)));
    assert_int_equal(rs__budget_remaining(&b, t0 + MS(10000)), 100);
    rs__budget_dispose(&b);
}

static void zero_budget_allows_no_retry(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    t->opts.budget.percent = 0;
    t->opts.budget.min_per_sec = 0;
    rt_start(t);
    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(res.reason, RS_REASON_BUDGET_EXHAUSTED);
    assert_int_equal(res.attempts, 1);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, rt_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(full_outage_attempts_stay_within_budget),
        T(without_a_budget_the_storm_is_3x),
        T(budget_refills_as_the_window_slides),
        T(ratio_plus_floor_arithmetic),
        T(zero_budget_allows_no_retry),
    };

    svc_log_set_level(SVC_LOG_ERROR);
    return cmocka_run_group_tests_name("rs_budget", tests, NULL, NULL);
}
