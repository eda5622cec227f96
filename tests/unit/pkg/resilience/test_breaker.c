/* SPDX-License-Identifier: Apache-2.0 */
/* test_breaker.c - every breaker transition, what counts, and permit safety. */
#include <string.h>

#include "rs_test.h"
#include "support/capture.h"

static int setup(void **state)
{
    int rc = rt_setup(state);

    if (rc == 0) /* one attempt per call: one verdict each */
        ((rt_t *)*state)->opts.policy.max_attempts = 1;
    return rc;
}

/* Five failed calls of a method that is never retried. */
static void trip(rt_t *t)
{
    rs_result_t res;

    for (int i = 0; i < 5; i++)
        rt_call(t, CREATE_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
}

static void closed_to_open_after_five_consecutive_failures(void **state)
{
    rt_t *t = *state;
    rs_result_t res;

    rt_start(t);
    for (int i = 0; i < 4; i++) {
        rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
        assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    }
    assert_int_equal(t->n_transitions, 0);
    rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
    assert_int_equal(t->n_transitions, 1);
    assert_string_equal(t->transitions[0],
                        "breaker catalog: closed -> open after 5 consecutive failures");
}

static void open_fails_fast_without_an_attempt(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    rt_start(t);
    trip(t);
    rt_script_init(&s, t, SVC_OK, 1);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(res.reason, RS_REASON_BREAKER_OPEN);
    assert_int_equal(res.attempts, 0);
    assert_int_equal(s.calls, 0); /* no network attempt */
    assert_int_equal(rs_upstream_ms_until_trial(t->up), 10000);
    fake_clock_advance_ms(&t->clock, 2500);
    assert_int_equal(rs_upstream_ms_until_trial(t->up), 7500);
}

static void open_to_half_open_to_closed(void **state)
{
    rt_t *t = *state;
    rs_call_t trial, other;
    rs_outcome_t ok = rt_outcome(SVC_OK);
    uint64_t dl;

    rt_start(t);
    trip(t);
    fake_clock_advance_ms(&t->clock, 9999);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &other), SVC_EUNAVAIL);
    rs_call_finish(&other, NULL);
    fake_clock_advance_ms(&t->clock, 1);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &trial), SVC_OK);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_HALF_OPEN);
    assert_string_equal(t->transitions[1],
                        "breaker catalog: open -> half-open after 10000ms cooldown");
    /* One trial at a time: the next caller is turned away. */
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &other), SVC_EUNAVAIL);
    rs_call_finish(&other, NULL);
    assert_true(rs_upstream_ms_until_trial(t->up) > 0);
    assert_int_equal(rs_call_attempt(&trial, &dl), SVC_OK);
    assert_int_equal(rs_call_end_attempt(&trial, &ok).action, RS_DONE);
    rs_call_finish(&trial, NULL);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    assert_int_equal(t->n_transitions, 3);
    assert_string_equal(t->transitions[2],
                        "breaker catalog: half-open -> closed after 1 successful trial");
    assert_int_equal(rs_upstream_ms_until_trial(t->up), 0);
}

static void failed_trial_reopens_with_a_new_cooldown(void **state)
{
    rt_t *t = *state;
    rs_result_t res;

    rt_start(t);
    trip(t);
    fake_clock_advance_ms(&t->clock, 10000);
    rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res); /* the trial */
    assert_int_equal(res.attempts, 1);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
    assert_string_equal(t->transitions[2],
                        "breaker catalog: half-open -> open after a failed trial");
    assert_int_equal(rs_upstream_ms_until_trial(t->up), 10000);
}

static void business_errors_never_trip_and_reset_the_count(void **state)
{
    rt_t *t = *state;
    const svc_err_t business[] = {SVC_ENOTFOUND, SVC_EINVAL, SVC_EEXIST,
                                  SVC_EPRECOND,  SVC_EPERM,  SVC_EUNIMPL};
    rs_result_t res;

    rt_start(t);
    for (int round = 0; round < 20; round++)
        for (size_t i = 0; i < SVC_COUNTOF(business); i++)
            rt_call(t, GET_PRODUCT, business[i], &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    /* A NOT_FOUND is an answer: the server is up, the streak is broken. */
    for (int i = 0; i < 4; i++)
        rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    rt_call(t, GET_PRODUCT, SVC_ENOTFOUND, &res);
    for (int i = 0; i < 4; i++)
        rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    assert_int_equal(t->n_transitions, 0);
}

static void cancelled_and_caller_deadline_are_ignored(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    rt_start(t);
    for (int i = 0; i < 4; i++)
        rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    /* Neither a failure nor a success: the streak is neither extended nor broken. */
    rt_call(t, GET_PRODUCT, SVC_ECANCELLED, &res);
    rt_script_init(&s, t, SVC_ETIMEDOUT, 1);
    s.outcomes[0].attempt_timer_fired = true; /* ...but the caller's deadline was the earlier */
    assert_int_equal(rt_run(t, GET_PRODUCT, atomic_load(&t->clock.now_ns) + MS(500), &s, &res),
                     SVC_ETIMEDOUT);
    assert_int_equal(res.reason, RS_REASON_DEADLINE);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
}

static void attempt_timeouts_count_as_failures(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    rt_start(t);
    for (int i = 0; i < 5; i++) {
        rt_script_init(&s, t, SVC_ETIMEDOUT, 1);
        s.outcomes[0].attempt_timer_fired = true;
        assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_ETIMEDOUT);
    }
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
}

static void cancelled_trial_releases_its_permit(void **state)
{
    rt_t *t = *state;
    rs_call_t trial, next;
    rs_outcome_t cancelled = rt_outcome(SVC_ECANCELLED);
    uint64_t dl;

    rt_start(t);
    trip(t);
    fake_clock_advance_ms(&t->clock, 10000);
    /* 1: the trial's outcome is the caller's own CANCELLED. */
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &trial), SVC_OK);
    assert_int_equal(rs_call_attempt(&trial, &dl), SVC_OK);
    assert_int_equal(rs_call_end_attempt(&trial, &cancelled).reason, RS_REASON_NOT_RETRYABLE);
    rs_call_finish(&trial, NULL);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_HALF_OPEN);
    /* 2: the trial is abandoned mid-attempt (finish without a verdict). */
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &trial), SVC_OK);
    assert_int_equal(rs_call_attempt(&trial, &dl), SVC_OK);
    rs_call_finish(&trial, NULL);
    /* 3: the trial is abandoned before its first attempt. */
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &trial), SVC_OK);
    rs_call_finish(&trial, NULL);
    /* Each time the permit came back: the next caller is the trial. */
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &next), SVC_OK);
    rs_call_finish(&next, NULL);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_HALF_OPEN);
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
}

/* One two-line order in half-open, as pricing makes it: line 1 and line 2
 * are begun together, line 2 is rejected, and the order gives up on line 1.
 * run_on: line 1 runs on to its verdict (what the gRPC binding does with a
 * trial), else it is finished without one. Returns whether both ran. */
static bool two_line_order(rt_t *t, bool run_on)
{
    rs_call_t line1, line2;
    rs_outcome_t ok = rt_outcome(SVC_OK);
    bool both;
    uint64_t dl;

    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &line1), SVC_OK);
    assert_int_equal(rs_call_attempt(&line1, &dl), SVC_OK);
    both = rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &line2) == SVC_OK;
    if (both) {
        assert_false(rs_call_is_trial(&line1));
        assert_false(rs_call_is_trial(&line2));
        assert_int_equal(rs_call_attempt(&line2, &dl), SVC_OK);
        assert_int_equal(rs_call_end_attempt(&line2, &ok).action, RS_DONE);
    } else {
        assert_true(rs_call_is_trial(&line1)); /* the sibling failed: line 1 is the trial */
    }
    rs_call_finish(&line2, NULL);
    if (both || run_on)
        assert_int_equal(rs_call_end_attempt(&line1, &ok).action, RS_DONE);
    rs_call_finish(&line1, NULL);
    return both;
}

static void a_sibling_failure_must_not_cost_the_trial_its_verdict(void **state)
{
    rt_t *t = *state;

    rt_start(t);
    trip(t);
    fake_clock_advance_ms(&t->clock, 10000);
    /* Finishing the trial when its sibling fails hands the permit on, and the
     * next order does the same: the upstream is fine, the breaker never
     * learns it (the multi-item order trap). */
    for (int order = 0; order < 5; order++)
        assert_false(two_line_order(t, false));
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_HALF_OPEN);
    /* Letting the trial run to its verdict closes the breaker at once: the
     * order that took the trial fails, the next one goes through whole. */
    assert_false(two_line_order(t, true));
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    assert_true(two_line_order(t, true));
    assert_int_equal(rs_upstream_in_flight(t->up), 0);
}

static void unsettled_trial_times_out_and_reopens(void **state)
{
    rt_t *t = *state;
    rs_call_t lost, other;

    rt_start(t);
    trip(t);
    fake_clock_advance_ms(&t->clock, 10000);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &lost), SVC_OK);
    fake_clock_advance_ms(&t->clock, RS_DEFAULT_BREAKER_TRIAL_TIMEOUT_MS);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &other), SVC_EUNAVAIL);
    rs_call_finish(&other, NULL);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
    assert_string_equal(t->transitions[2],
                        "breaker catalog: half-open -> open after a trial got no verdict in "
                        "30000ms");
    /* The late trial's verdict belongs to a past epoch: it cannot close. */
    rs_call_finish(&lost, NULL);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
}

static void breaker_counts_logical_calls_not_attempts(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    t->opts.policy.max_attempts = 3;
    t->opts.breaker.failures = 2;
    rt_start(t);
    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(res.attempts, 3);
    /* Three failed attempts are one failed call: breaker outside retry. */
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
}

static void retry_stops_when_the_breaker_opens_mid_call(void **state)
{
    rt_t *t = *state;
    rs_call_t slow;
    rs_outcome_t unavail = rt_outcome(SVC_EUNAVAIL);
    rs_decision_t d;
    rs_result_t res;
    uint64_t dl;

    t->opts.policy.max_attempts = 3;
    rt_start(t);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &slow), SVC_OK);
    assert_int_equal(rs_call_attempt(&slow, &dl), SVC_OK);
    trip(t);
    d = rs_call_end_attempt(&slow, &unavail);
    assert_int_equal(d.action, RS_FAIL);
    assert_int_equal(d.reason, RS_REASON_BREAKER_OPEN);
    assert_int_equal(d.err, SVC_EUNAVAIL); /* the last real error */
    rs_call_finish(&slow, &res);
    assert_int_equal(res.attempts, 1);
}

static void breaker_opening_during_backoff_stops_the_retry(void **state)
{
    rt_t *t = *state;
    rs_call_t slow;
    rs_outcome_t unavail = rt_outcome(SVC_EUNAVAIL);
    rs_result_t res;
    uint64_t dl;

    t->opts.policy.max_attempts = 3;
    t->opts.breaker.failures = 3;
    rt_start(t);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &slow), SVC_OK);
    assert_int_equal(rs_call_attempt(&slow, &dl), SVC_OK);
    assert_int_equal(rs_call_end_attempt(&slow, &unavail).action, RS_RETRY);
    for (int i = 0; i < 3; i++) { /* single-attempt calls, while `slow` waits */
        rs_call_t c;
        assert_int_equal(rs_call_begin(t->up, CREATE_PRODUCT, SVC_DEADLINE_NONE, &c), SVC_OK);
        assert_int_equal(rs_call_attempt(&c, &dl), SVC_OK);
        assert_int_equal(rs_call_end_attempt(&c, &unavail).reason, RS_REASON_NOT_IDEMPOTENT);
        rs_call_finish(&c, NULL);
    }
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
    assert_int_equal(rs_call_attempt(&slow, &dl), SVC_EUNAVAIL);
    rs_call_finish(&slow, &res);
    assert_int_equal(res.reason, RS_REASON_BREAKER_OPEN);
    assert_int_equal(res.attempts, 1);
}

static void failure_ratio_mode(void **state)
{
    rt_t *t = *state;
    rs_result_t res;

    t->opts.breaker.failures = 0; /* ratio rule only */
    t->opts.breaker.ratio_pct = 50;
    t->opts.breaker.ratio_min_calls = 10;
    rt_start(t);
    for (int i = 0; i < 9; i++) /* 9 failures of 9 calls: under the minimum */
        rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    rt_call(t, GET_PRODUCT, SVC_OK, &res); /* 10 calls, 90%: but a success never trips */
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
    assert_string_equal(t->transitions[0],
                        "breaker catalog: closed -> open after 90% failures over 11 calls");
}

static void failure_ratio_below_threshold_stays_closed(void **state)
{
    rt_t *t = *state;
    rs_result_t res;

    t->opts.breaker.failures = 0;
    t->opts.breaker.ratio_pct = 50;
    t->opts.breaker.ratio_min_calls = 10;
    rt_start(t);
    for (int i = 0; i < 100; i++) /* 30% failures (never 50% past 10 calls) */
        rt_call(t, GET_PRODUCT, i % 10 < 3 ? SVC_EUNAVAIL : SVC_OK, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
    /* The window forgets: 10 s later, old successes no longer dilute. */
    fake_clock_advance_ms(&t->clock, 11000);
    for (int i = 0; i < 10; i++)
        rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
}

static void cooldown_jitter_stays_in_bounds(void **state)
{
    rt_t *t = *state;

    t->opts.breaker.cooldown_jitter_pct = 20;
    t->random_value = UINT64_MAX - 1; /* near the top of [0, 2000] ms extra */
    rt_start(t);
    trip(t);
    assert_in_range(rs_upstream_ms_until_trial(t->up), 10000, 12000);
}

static void several_trials_must_all_succeed(void **state)
{
    rt_t *t = *state;
    rs_call_t c[3];
    rs_outcome_t ok = rt_outcome(SVC_OK);
    uint64_t dl;

    t->opts.breaker.trials = 2;
    rt_start(t);
    trip(t);
    fake_clock_advance_ms(&t->clock, 10000);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c[0]), SVC_OK);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c[1]), SVC_OK);
    assert_int_equal(rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c[2]), SVC_EUNAVAIL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rs_call_attempt(&c[i], &dl), SVC_OK);
        assert_int_equal(rs_call_end_attempt(&c[i], &ok).action, RS_DONE);
        rs_call_finish(&c[i], NULL);
        assert_int_equal(rs_upstream_breaker_state(t->up),
                         i == 0 ? RS_BREAKER_HALF_OPEN : RS_BREAKER_CLOSED);
    }
    rs_call_finish(&c[2], NULL);
}

static void disabled_breaker_never_opens(void **state)
{
    rt_t *t = *state;
    rs_result_t res;

    t->opts.breaker.failures = 0;
    rt_start(t);
    for (int i = 0; i < 100; i++)
        rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
}

static void default_transition_goes_to_the_log(void **state)
{
    rt_t *t = *state;
    const char *log;

    t->opts.on_transition = NULL;
    rt_start(t);
    svc_log_set_level(SVC_LOG_INFO);
    tcap_begin();
    trip(t);
    log = tcap_end();
    assert_non_null(strstr(log, "level=warn mod=resilience msg=\"breaker catalog: closed -> open "
                                "after 5 consecutive failures\" upstream=catalog from=closed "
                                "to=open"));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, rt_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(closed_to_open_after_five_consecutive_failures),
        T(open_fails_fast_without_an_attempt),
        T(open_to_half_open_to_closed),
        T(failed_trial_reopens_with_a_new_cooldown),
        T(business_errors_never_trip_and_reset_the_count),
        T(cancelled_and_caller_deadline_are_ignored),
        T(attempt_timeouts_count_as_failures),
        T(cancelled_trial_releases_its_permit),
        T(a_sibling_failure_must_not_cost_the_trial_its_verdict),
        T(unsettled_trial_times_out_and_reopens),
        T(breaker_counts_logical_calls_not_attempts),
        T(retry_stops_when_the_breaker_opens_mid_call),
        T(breaker_opening_during_backoff_stops_the_retry),
        T(failure_ratio_mode),
        T(failure_ratio_below_threshold_stays_closed),
        T(cooldown_jitter_stays_in_bounds),
        T(several_trials_must_all_succeed),
        T(disabled_breaker_never_opens),
        T(default_transition_goes_to_the_log),
    };

    svc_log_set_level(SVC_LOG_ERROR); /* keep the test output readable */
    return cmocka_run_group_tests_name("rs_breaker", tests, NULL, NULL);
}
