/* SPDX-License-Identifier: Apache-2.0 */
/* test_retry.c - what is retried, how often, how long we wait, and the logs. */
#include <string.h>

#include "rs_test.h"
#include "support/capture.h"

/* Retry alone: the breaker and the budget have their own tests. */
static int setup(void **state)
{
    int rc = rt_setup(state);

    if (rc == 0) {
        rt_t *t = *state;
        t->opts.breaker.failures = 0;
        t->opts.budget.window_ms = 0;
    }
    return rc;
}

/* ---- what may be retried --------------------------------------------------- */

typedef struct retry_case {
    const char *name;
    svc_err_t err;
    int http_status;
    bool timer_fired;
    bool retried;
    rs_reason_t reason_if_not;
} retry_case_t;

static const retry_case_t cases[] = {
    {"grpc UNAVAILABLE", SVC_EUNAVAIL, 0, false, true, 0},
    {"attempt timer", SVC_ETIMEDOUT, 0, true, true, 0},
    {"DEADLINE_EXCEEDED, not our timer", SVC_ETIMEDOUT, 0, false, false, RS_REASON_DEADLINE},
    {"NOT_FOUND", SVC_ENOTFOUND, 0, false, false, RS_REASON_NOT_RETRYABLE},
    {"INVALID_ARGUMENT", SVC_EINVAL, 0, false, false, RS_REASON_NOT_RETRYABLE},
    {"ALREADY_EXISTS", SVC_EEXIST, 0, false, false, RS_REASON_NOT_RETRYABLE},
    {"FAILED_PRECONDITION", SVC_EPRECOND, 0, false, false, RS_REASON_NOT_RETRYABLE},
    {"INTERNAL", SVC_EINTERNAL, 0, false, false, RS_REASON_NOT_RETRYABLE},
    {"UNKNOWN", SVC_EUNKNOWN, 0, false, false, RS_REASON_NOT_RETRYABLE},
    {"RESOURCE_EXHAUSTED", SVC_EEXHAUSTED, 0, false, false, RS_REASON_NOT_RETRYABLE},
    {"CANCELLED", SVC_ECANCELLED, 0, false, false, RS_REASON_NOT_RETRYABLE},
    {"HTTP connection error", SVC_EUNAVAIL, 0, false, true, 0},
    {"HTTP 503", SVC_EUNAVAIL, 503, false, true, 0},
    {"HTTP 429", SVC_EUNAVAIL, 429, false, true, 0},
    {"HTTP 502", SVC_EUNAVAIL, 502, false, false, RS_REASON_NOT_RETRYABLE},
    {"HTTP 500", SVC_EINTERNAL, 500, false, false, RS_REASON_NOT_RETRYABLE},
    {"HTTP 404", SVC_ENOTFOUND, 404, false, false, RS_REASON_NOT_RETRYABLE},
};

static void only_transient_outcomes_are_retried(void **state)
{
    rt_t *t = *state;

    rt_start(t);
    for (size_t i = 0; i < SVC_COUNTOF(cases); i++) {
        rt_script_t s;
        rs_result_t res;
        svc_err_t err;

        rt_script_init(&s, t, SVC_OK, 2);
        s.outcomes[0].err = cases[i].err;
        s.outcomes[0].http_status = cases[i].http_status;
        s.outcomes[0].attempt_timer_fired = cases[i].timer_fired;
        err = rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res);
        print_message("case %s\n", cases[i].name);
        if (cases[i].retried) {
            assert_int_equal(err, SVC_OK);
            assert_int_equal(res.reason, RS_REASON_RETRIED);
            assert_int_equal(res.attempts, 2);
        } else {
            assert_int_equal(err, cases[i].err);
            assert_int_equal(res.reason, cases[i].reason_if_not);
            assert_int_equal(res.attempts, 1);
        }
    }
}

/* An upstream that answers "my own dependency failed" is up, and has done
 * its own retrying: not retried here, and the breaker counts it a success. */
static void dependency_failures_are_not_retried_and_never_trip(void **state)
{
    rt_t *t = *state;

    t->opts.breaker.failures = 3;
    rt_start(t);
    for (int i = 0; i < 10; i++) {
        rt_script_t s;
        rs_result_t res;

        rt_script_init(&s, t, SVC_OK, 2);
        s.outcomes[0].err = i % 2 ? SVC_EUNAVAIL : SVC_ETIMEDOUT;
        s.outcomes[0].attempt_timer_fired = i % 2 == 0;
        s.outcomes[0].dependency_failed = true;
        assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), s.outcomes[0].err);
        assert_int_equal(res.reason, RS_REASON_NOT_RETRYABLE);
        assert_int_equal(res.attempts, 1);
    }
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
}

static void check_not_retried(rt_t *t, const char *method)
{
    rt_script_t s;
    rs_result_t res;

    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    assert_int_equal(rt_run(t, method, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(res.reason, RS_REASON_NOT_IDEMPOTENT);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(s.calls, 1);
}

static void check_retried(rt_t *t, const char *method)
{
    rt_script_t s;
    rs_result_t res;

    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    assert_int_equal(rt_run(t, method, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(res.reason, RS_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(res.attempts, 3);
}

static void only_idempotent_methods_are_retried(void **state)
{
    static const rs_method_t table[] = {
        {.path = GET_PRODUCT, .idempotency = RS_IDEMPOTENT},
        {.path = CREATE_ORDER, .idempotency = RS_NOT_IDEMPOTENT},
        /* declared beats the name: a Reserve that is idempotent by design,
         * and a Get with side effects */
        {.path = "/shopmicro.catalog.v1.CatalogService/ReserveStock", .idempotency = RS_IDEMPOTENT},
        {.path = "/shopmicro.catalog.v1.CatalogService/GetAndIncrement",
         .idempotency = RS_NOT_IDEMPOTENT},
        {.path = "/shopmicro.catalog.v1.CatalogService/ListThings"}, /* by name */
    };
    rt_t *t = *state;

    t->opts.methods = table;
    t->opts.n_methods = SVC_COUNTOF(table);
    rt_start(t);
    check_retried(t, GET_PRODUCT);
    check_not_retried(t, CREATE_ORDER);
    check_retried(t, "/shopmicro.catalog.v1.CatalogService/ReserveStock");
    check_not_retried(t, "/shopmicro.catalog.v1.CatalogService/GetAndIncrement");
    check_retried(t, "/shopmicro.catalog.v1.CatalogService/ListThings");
    /* Undeclared methods: the Get*, List* rule, on the name after the last '/'. */
    check_retried(t, UNDECLARED_GET);
    check_retried(t, "/shopmicro.catalog.v1.CatalogService/List");
    check_not_retried(t, UNDECLARED_CREATE);
    check_not_retried(t, "/shopmicro.order.v1.OrderService/CreateOrderDraft");
    check_not_retried(t, "/shopmicro.catalog.v1.CatalogService/Getaway");
    check_not_retried(t, "/shopmicro.catalog.v1.CatalogService/Listen");
    check_not_retried(t, "/shopmicro.catalog.v1.GetService/DeleteProduct");
}

static void attempts_are_counted_and_capped(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    rt_start(t);
    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(res.attempts, 3);
    assert_int_equal(res.reason, RS_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(s.calls, 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(s.number[i], i + 1);
    assert_int_equal(t->sleeps, 2); /* no sleep after the last attempt */

    rt_script_init(&s, t, SVC_EUNAVAIL, 3);
    s.outcomes[2] = rt_outcome(SVC_OK);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_OK);
    assert_int_equal(res.reason, RS_REASON_RETRIED);
    assert_int_equal(res.attempts, 3);
}

static void method_rows_override_the_policy(void **state)
{
    static const rs_method_t table[] = {
        {.path = GET_PRODUCT,
         .idempotency = RS_IDEMPOTENT,
         .policy = {.max_attempts = 5, .retry_on = RS_RETRY_UNAVAILABLE}},
    };
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    t->opts.methods = table;
    t->opts.n_methods = 1;
    rt_start(t);
    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(res.attempts, 5);
    rt_script_init(&s, t, SVC_ETIMEDOUT, 1);
    s.outcomes[0].attempt_timer_fired = true; /* retryable by default, not here */
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_ETIMEDOUT);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(res.reason, RS_REASON_NOT_RETRYABLE);
    /* The rest is inherited: the attempt timeout is still the default. */
    assert_int_equal(s.deadline_ns[0] - s.start_ns[0], MS(RS_DEFAULT_ATTEMPT_TIMEOUT_MS));
}

/* ---- backoff ----------------------------------------------------------------- */

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 0x2545f4914f6cdd1dull;
}

/* For each jitter kind and retry number, many real random draws must all
 * land in the documented interval and reach both of its ends. */
static void backoff_bounds_for_each_jitter_kind(void **state)
{
    const uint32_t base = 100, cap = 2000, draws = 20000;
    uint64_t prng = 0x853c49e6748fea9bull;

    (void)state;
    for (uint32_t n = 0; n < 40; n++) {
        uint64_t w = n >= 32 ? cap : (uint64_t)base << n;
        uint32_t lo[2] = {UINT32_MAX, UINT32_MAX}, hi[2] = {0, 0};

        w = w > cap ? cap : w;
        for (uint32_t i = 0; i < draws; i++) {
            uint32_t full = rs_backoff_ms(RS_JITTER_FULL, base, cap, n, xorshift(&prng));
            uint32_t equal = rs_backoff_ms(RS_JITTER_EQUAL, base, cap, n, xorshift(&prng));
            assert_in_range(full, 0, w);
            assert_in_range(equal, w / 2, w);
            lo[0] = full < lo[0] ? full : lo[0];
            hi[0] = full > hi[0] ? full : hi[0];
            lo[1] = equal < lo[1] ? equal : lo[1];
            hi[1] = equal > hi[1] ? equal : hi[1];
        }
        /* Jitter really is there, at the cap too (aws-sdk-go-v2#3091). */
        assert_true(lo[0] <= w / 20 && hi[0] >= w - w / 20);
        assert_true(lo[1] <= w / 2 + w / 40 && hi[1] >= w - w / 40);
        assert_int_equal(rs_backoff_ms(RS_JITTER_NONE, base, cap, n, xorshift(&prng)), w);
    }
    assert_int_equal(rs_backoff_ms(RS_JITTER_FULL, 100, 2000, 0, 0), 0);
    assert_int_equal(rs_backoff_ms(RS_JITTER_FULL, 100, 2000, 0, UINT64_MAX), 100);
    assert_int_equal(rs_backoff_ms(RS_JITTER_EQUAL, 100, 2000, 0, 0), 50);
}

static void engine_sleeps_the_backoff(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    t->opts.policy.jitter = RS_JITTER_NONE;
    t->opts.policy.max_attempts = 5;
    t->opts.policy.backoff_cap_ms = 250;
    rt_start(t);
    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(t->sleeps, 4);
    assert_int_equal(t->slept_ns, MS(100 + 200 + 250 + 250));
}

static void engine_draws_jitter_within_bounds(void **state)
{
    const struct {
        rs_jitter_t kind;
        uint64_t random;
        uint64_t want_ms;
    } draws[] = {
        {RS_JITTER_FULL, 0, 0},   {RS_JITTER_FULL, UINT64_MAX, 100},
        {RS_JITTER_EQUAL, 0, 50}, {RS_JITTER_EQUAL, UINT64_MAX, 100},
        {RS_JITTER_NONE, 0, 100},
    };
    rt_t *t = *state;

    for (size_t i = 0; i < SVC_COUNTOF(draws); i++) {
        rt_script_t s;
        rs_result_t res;

        t->opts.policy.jitter = draws[i].kind;
        t->random_value = draws[i].random;
        t->slept_ns = 0;
        rt_start(t);
        rt_script_init(&s, t, SVC_EUNAVAIL, 1);
        s.outcomes[1] = rt_outcome(SVC_OK);
        s.n = 2;
        assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_OK);
        assert_int_equal(t->slept_ns, MS(draws[i].want_ms));
        rt_stop(t);
    }
}

/* ---- the deadline ------------------------------------------------------------ */

static void never_sleeps_past_the_deadline(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;
    uint64_t deadline;

    t->opts.policy.jitter = RS_JITTER_NONE;
    rt_start(t);
    deadline = atomic_load(&t->clock.now_ns) + MS(250);
    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    /* 1 ms attempt, 100 ms sleep, 1 ms attempt, then 200 ms would end past 250. */
    assert_int_equal(rt_run(t, GET_PRODUCT, deadline, &s, &res), SVC_EUNAVAIL);
    assert_int_equal(res.reason, RS_REASON_DEADLINE);
    assert_int_equal(res.attempts, 2);
    assert_int_equal(t->sleeps, 1);
    assert_true(atomic_load(&t->clock.now_ns) < deadline);
}

/* Sweep deadlines and random draws: no sleep ever ends less than
 * min_attempt_ms before the deadline, no attempt starts after it. */
static void deadline_sweep(void **state)
{
    rt_t *t = *state;
    uint64_t prng = 42;

    t->opts.policy.max_attempts = 10;
    rt_start(t);
    for (uint32_t ms = 0; ms < 3000; ms += 7) {
        uint64_t start = atomic_load(&t->clock.now_ns), deadline = start + MS(ms);
        rt_script_t s;
        rs_result_t res;

        t->random_value = xorshift(&prng);
        t->sleeps = 0;
        rt_script_init(&s, t, SVC_EUNAVAIL, 1);
        (void)rt_run(t, GET_PRODUCT, deadline, &s, &res);
        for (unsigned i = 0; i < t->sleeps && i < RT_MAX_RECORDS; i++)
            assert_true(t->sleep_end_ns[i] + MS(RS_DEFAULT_MIN_ATTEMPT_MS) <= deadline);
        for (size_t i = 0; i < s.calls; i++) {
            assert_true(s.start_ns[i] < deadline);
            assert_true(s.deadline_ns[i] <= deadline);
        }
        assert_true(res.reason == RS_REASON_DEADLINE || res.reason == RS_REASON_ATTEMPTS_EXHAUSTED);
        assert_int_equal(res.err, ms < RS_DEFAULT_MIN_ATTEMPT_MS ? SVC_ETIMEDOUT : SVC_EUNAVAIL);
    }
}

/* ---- pushback ----------------------------------------------------------------- */

static rs_result_t run_with_pushback(rt_t *t, int64_t pushback_ms, uint64_t deadline)
{
    rt_script_t s;
    rs_result_t res;

    rt_script_init(&s, t, SVC_OK, 2);
    s.outcomes[0] = rt_outcome(SVC_EUNAVAIL);
    s.outcomes[0].pushback_ms = pushback_ms;
    t->slept_ns = 0;
    (void)rt_run(t, GET_PRODUCT, deadline, &s, &res);
    return res;
}

static void pushback_is_honoured_never_shortened(void **state)
{
    rt_t *t = *state;
    rs_result_t res;
    uint64_t now;

    rt_start(t); /* full jitter at the top of the window: backoff 100 ms */
    res = run_with_pushback(t, 500, SVC_DEADLINE_NONE);
    assert_int_equal(res.reason, RS_REASON_RETRIED);
    assert_int_equal(t->slept_ns, MS(500)); /* longer than the backoff: wait it */
    assert_int_equal(res.pushback_ms, 0);   /* the call succeeded: no hint to pass on */
    res = run_with_pushback(t, 30, SVC_DEADLINE_NONE);
    assert_int_equal(t->slept_ns, MS(100)); /* shorter: the backoff stands */
    now = atomic_load(&t->clock.now_ns);
    res = run_with_pushback(t, 3000, now + MS(1000));
    assert_int_equal(res.reason, RS_REASON_DEADLINE); /* can't hold it: give up */
    assert_int_equal(res.err, SVC_EUNAVAIL);
    assert_int_equal(t->slept_ns, 0);
    assert_int_equal(res.pushback_ms, 3000); /* the server's wait, for the caller's caller */
    res = run_with_pushback(t, RS_PUSHBACK_STOP, SVC_DEADLINE_NONE);
    assert_int_equal(res.reason, RS_REASON_PUSHBACK);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(res.pushback_ms, 0);              /* "do not retry" says no when */
    res = run_with_pushback(t, -7, SVC_DEADLINE_NONE); /* any negative but -1 */
    assert_int_equal(res.reason, RS_REASON_PUSHBACK);
    res = run_with_pushback(t, RS_DEFAULT_MAX_PUSHBACK_MS + 1, SVC_DEADLINE_NONE);
    assert_int_equal(res.reason, RS_REASON_PUSHBACK);
    assert_int_equal(t->slept_ns, 0);
}

/* A shed call (RESOURCE_EXHAUSTED with a pushback hint) is retried after
 * the hint, like HTTP 429 + Retry-After, and never trips the breaker: the
 * server answered. Without the hint it stays a quota answer (not retried,
 * the "RESOURCE_EXHAUSTED" row above). */
static void shed_with_pushback_is_retried_after_it(void **state)
{
    rt_t *t = *state;

    t->opts.breaker.failures = 2;
    rt_start(t);
    for (int i = 0; i < 5; i++) {
        rt_script_t s;
        rs_result_t res;

        rt_script_init(&s, t, SVC_OK, 2);
        s.outcomes[0] = rt_outcome(SVC_EEXHAUSTED);
        s.outcomes[0].pushback_ms = 400;
        t->slept_ns = 0;
        assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_OK);
        assert_int_equal(res.reason, RS_REASON_RETRIED);
        assert_int_equal(res.attempts, 2);
        assert_int_equal(t->slept_ns, MS(400));
    }
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_CLOSED);
}

static void pushback_parsers(void **state)
{
    (void)state;
    assert_int_equal(rs_pushback_parse_grpc("250", 3), 250);
    assert_int_equal(rs_pushback_parse_grpc("0", 1), 0);
    assert_int_equal(rs_pushback_parse_grpc("-1", 2), RS_PUSHBACK_STOP);
    assert_int_equal(rs_pushback_parse_grpc("12x", 3), RS_PUSHBACK_STOP);
    assert_int_equal(rs_pushback_parse_grpc("", 0), RS_PUSHBACK_STOP);
    assert_int_equal(rs_pushback_parse_grpc("99999999999999999999", 20), RS_PUSHBACK_STOP);
    assert_int_equal(rs_pushback_parse_grpc(NULL, 0), RS_PUSHBACK_NONE);
    assert_int_equal(rs_pushback_parse_grpc("1234", 2), 12); /* not NUL-terminated: len rules */

    assert_int_equal(rs_pushback_parse_retry_after("120", 3, 0), 120000);
    assert_int_equal(rs_pushback_parse_retry_after(" 5 ", 3, 0), 5000);
    /* 784111777 = Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example) */
    assert_int_equal(
        rs_pushback_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 29, 784111777 - 30), 30000);
    assert_int_equal(
        rs_pushback_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 29, 784111777 + 5), 0);
    assert_int_equal(rs_pushback_parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", 30, 0),
                     RS_PUSHBACK_NONE);
    assert_int_equal(rs_pushback_parse_retry_after("soon", 4, 0), RS_PUSHBACK_NONE);
    assert_int_equal(rs_pushback_parse_retry_after("-3", 2, 0), RS_PUSHBACK_NONE);
    assert_int_equal(rs_pushback_parse_retry_after(NULL, 0, 0), RS_PUSHBACK_NONE);
}

/* ---- logs ---------------------------------------------------------------------- */

static void one_log_line_per_decision(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;
    const char *log;

    t->random_value = rt_random_for(78, 100);
    rt_start(t);
    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    s.outcomes[0].detail = "connection refused";
    svc_log_set_level(SVC_LOG_INFO);
    tcap_begin();
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    log = tcap_end();
    svc_log_set_level(SVC_LOG_ERROR);
    assert_non_null(strstr(log, "level=warn mod=resilience msg=\"" GET_PRODUCT
                                " failed (attempt 1/3), retrying in 78ms: UNAVAILABLE connection "
                                "refused\" upstream=catalog method=" GET_PRODUCT
                                " attempt=1 max_attempts=3 decision=retry reason=unavailable "
                                "err=UNAVAILABLE\n"));
    assert_non_null(strstr(log, GET_PRODUCT " failed (attempt 2/3), retrying in "));
    assert_non_null(strstr(log,
                           GET_PRODUCT " failed (attempt 3/3), giving up "
                                       "(attempts-exhausted): UNAVAILABLE connection refused\""));
    assert_non_null(strstr(log, "decision=fail reason=attempts-exhausted err=UNAVAILABLE\n"));
    /* Three decisions, three lines. */
    assert_int_equal(strchr(strchr(strchr(log, '\n') + 1, '\n') + 1, '\n')[1], '\0');
}

static void happy_path_logs_nothing(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    rt_start(t);
    rt_script_init(&s, t, SVC_OK, 1);
    svc_log_set_level(SVC_LOG_DEBUG);
    tcap_begin();
    for (int i = 0; i < 10; i++)
        assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_OK);
    assert_string_equal(tcap_end(), "");
    svc_log_set_level(SVC_LOG_ERROR);
}

static void business_errors_log_at_debug_only(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;

    rt_start(t);
    rt_script_init(&s, t, SVC_ENOTFOUND, 1);
    svc_log_set_level(SVC_LOG_INFO);
    tcap_begin();
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_ENOTFOUND);
    assert_string_equal(tcap_end(), "");
    svc_log_set_level(SVC_LOG_ERROR);
}

/* ---- one policy, two drivers ---------------------------------------------------- */

/* An event loop drives the engine with timers instead of sleeps; it must see
 * exactly the decisions rs_call_run() acts on. */
static void event_loop_and_blocking_drivers_agree(void **state)
{
    rt_t *t = *state;
    rt_script_t blocking, loop;
    rs_result_t res;
    rs_call_t c;
    uint64_t dl, timer_at = 0;
    svc_err_t err;

    t->random_value = rt_random_for(60, 100);
    rt_start(t);
    rt_script_init(&blocking, t, SVC_EUNAVAIL, 3);
    blocking.outcomes[2] = rt_outcome(SVC_OK);
    loop = blocking;
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &blocking, &res), SVC_OK);

    fake_clock_init(&t->clock, RT_START_NS);
    err = rs_call_begin(t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c);
    while (err == SVC_OK) { /* the "loop": a timer callback per retry */
        rs_outcome_t o = RS_OUTCOME_INIT;
        rs_attempt_t at = {0, 0, 0};
        rs_decision_t d;

        if (timer_at > atomic_load(&t->clock.now_ns))
            fake_clock_advance_ns(&t->clock, timer_at - atomic_load(&t->clock.now_ns));
        err = rs_call_attempt(&c, &dl);
        assert_int_equal(err, SVC_OK);
        at.deadline_ns = dl;
        at.number = rs_call_attempts(&c);
        rt_op(&loop, &at, &o);
        d = rs_call_end_attempt(&c, &o);
        if (d.action != RS_RETRY)
            break;
        timer_at = atomic_load(&t->clock.now_ns) + MS(d.delay_ms);
    }
    rs_call_finish(&c, &res);
    assert_int_equal(res.err, SVC_OK);
    assert_int_equal(loop.calls, blocking.calls);
    for (size_t i = 0; i < loop.calls; i++) {
        assert_int_equal(loop.start_ns[i], blocking.start_ns[i]);
        assert_int_equal(loop.deadline_ns[i], blocking.deadline_ns[i]);
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, rt_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(only_transient_outcomes_are_retried),
        T(dependency_failures_are_not_retried_and_never_trip),
        T(only_idempotent_methods_are_retried),
        T(attempts_are_counted_and_capped),
        T(method_rows_override_the_policy),
        T(backoff_bounds_for_each_jitter_kind),
        T(engine_sleeps_the_backoff),
        T(engine_draws_jitter_within_bounds),
        T(never_sleeps_past_the_deadline),
        T(deadline_sweep),
        T(pushback_is_honoured_never_shortened),
        T(shed_with_pushback_is_retried_after_it),
        T(pushback_parsers),
        T(one_log_line_per_decision),
        T(happy_path_logs_nothing),
        T(business_errors_log_at_debug_only),
        T(event_loop_and_blocking_drivers_agree),
    };

    svc_log_set_level(SVC_LOG_ERROR);
    return cmocka_run_group_tests_name("rs_retry", tests, NULL, NULL);
}
