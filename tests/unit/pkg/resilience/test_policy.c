/* SPDX-License-Identifier: Apache-2.0 */
/* test_policy.c - defaults, validation, the method table and outcome classes. */
#include <string.h>

#include "internal.h"
#include "rs_test.h"

static void defaults_are_the_named_values(void **state)
{
    rs_upstream_opts_t o;

    (void)state;
    rs_upstream_opts_init(&o);
    assert_int_equal(o.policy.attempt_timeout_ms, 3000);
    assert_int_equal(o.policy.max_attempts, 3);
    assert_int_equal(o.policy.backoff_base_ms, 100);
    assert_int_equal(o.policy.backoff_cap_ms, 2000);
    assert_int_equal(o.policy.jitter, RS_JITTER_FULL);
    assert_int_equal(o.policy.retry_on, RS_RETRY_DEFAULT);
    assert_int_equal(o.breaker.failures, 5);
    assert_int_equal(o.breaker.cooldown_ms, 10000);
    assert_int_equal(o.breaker.trials, 1);
    assert_int_equal(o.budget.percent, 10);
    assert_int_equal(o.budget.min_per_sec, 10);
    assert_int_equal(o.budget.window_ms, 10000);
    assert_int_equal(o.max_concurrent, 0);
    assert_int_equal(o.min_attempt_ms, 5);
    assert_null(o.name);
    assert_null(o.clock);
}

/* RS_NAME_MAX + 1 characters */
#define NAME_64 "a123456789b123456789c123456789d123456789e123456789f123456789g1234"

/* One way to spoil otherwise valid options, per case. */
typedef enum spoil {
    BAD_NAME,
    LONG_NAME,
    NO_NAME,
    ATTEMPTS_11,
    BASE_GT_CAP,
    BAD_JITTER,
    BAD_RETRY_ON,
    TRIALS_0,
    TRIALS_65,
    COOLDOWN_0,
    RATIO_101,
    BUDGET_101,
    BUDGET_WINDOW_5,
    TOO_MANY_METHODS,
    SPOIL_COUNT
} spoil_t;

static void spoil(rs_upstream_opts_t *o, spoil_t how)
{
    switch (how) {
    case BAD_NAME:
        o->name = "cat alog";
        break;
    case LONG_NAME:
        o->name = NAME_64;
        break;
    case NO_NAME:
        o->name = NULL;
        break;
    case ATTEMPTS_11:
        o->policy.max_attempts = 11;
        break;
    case BASE_GT_CAP:
        o->policy.backoff_base_ms = 5000;
        break;
    case BAD_JITTER:
        o->policy.jitter = (rs_jitter_t)9;
        break;
    case BAD_RETRY_ON:
        o->policy.retry_on = 0x100;
        break;
    case TRIALS_0:
        o->breaker.trials = 0;
        break;
    case TRIALS_65:
        o->breaker.trials = 65;
        break;
    case COOLDOWN_0:
        o->breaker.cooldown_ms = 0;
        break;
    case RATIO_101:
        o->breaker.ratio_pct = 101;
        break;
    case BUDGET_101:
        o->budget.percent = 101;
        break;
    case BUDGET_WINDOW_5:
        o->budget.window_ms = 5;
        break;
    case TOO_MANY_METHODS:
        o->n_methods = RS_MAX_METHODS + 1;
        break;
    case SPOIL_COUNT:
        break;
    }
}

static void invalid_options_are_refused_with_a_reason(void **state)
{
    rs_upstream_t *up = NULL;

    (void)state;
    for (int i = 0; i < SPOIL_COUNT; i++) {
        char errbuf[SVC_ERRBUF_LEN] = "";
        rs_upstream_opts_t o;

        rs_upstream_opts_init(&o);
        o.name = "catalog";
        spoil(&o, (spoil_t)i);
        assert_int_equal(rs_upstream_new(&o, &up, errbuf), SVC_EINVAL);
        assert_null(up);
        assert_true(errbuf[0] != '\0');
    }
}

static svc_err_t build_table(const rs_method_t *rows, size_t n, char errbuf[static SVC_ERRBUF_LEN])
{
    rs_upstream_opts_t o;
    rs_upstream_t *up = NULL;
    svc_err_t err;

    rs_upstream_opts_init(&o);
    o.name = "catalog";
    o.methods = rows;
    o.n_methods = n;
    err = rs_upstream_new(&o, &up, errbuf);
    rs_upstream_free(up);
    return err;
}

static void invalid_tables_are_refused(void **state)
{
    const rs_method_t no_slash[] = {{.path = "GetProduct"}};
    const rs_method_t quote[] = {{.path = "/a.B/Get\"X"}};
    const rs_method_t twice[] = {{.path = GET_PRODUCT}, {.path = GET_PRODUCT}};
    const rs_method_t same_label[] = {{.path = "/a.A/GetX"}, {.path = "/b.B/GetX"}};
    const rs_method_t labelled[] = {{.path = "/a.A/GetX"},
                                    {.path = "/b.B/GetX", .label = "b_GetX"}};
    const rs_method_t other[] = {{.path = "/a.A/other"}};
    const rs_method_t row_attempts[] = {{.path = GET_PRODUCT, .policy = {.max_attempts = 99}}};
    const rs_method_t row_idem[] = {{.path = GET_PRODUCT, .idempotency = (rs_idempotency_t)7}};
    char errbuf[SVC_ERRBUF_LEN];

    (void)state;
    assert_int_equal(build_table(no_slash, 1, errbuf), SVC_EINVAL);
    assert_int_equal(build_table(quote, 1, errbuf), SVC_EINVAL);
    assert_int_equal(build_table(twice, 2, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "listed twice"));
    assert_int_equal(build_table(same_label, 2, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "set .label"));
    assert_int_equal(build_table(labelled, 2, errbuf), SVC_OK);
    assert_int_equal(build_table(other, 1, errbuf), SVC_EINVAL);
    assert_int_equal(build_table(row_attempts, 1, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, GET_PRODUCT ": max_attempts 99"));
    assert_int_equal(build_table(row_idem, 1, errbuf), SVC_EINVAL);
}

static void a_zeroed_options_struct_is_refused(void **state)
{
    rs_upstream_opts_t o;
    rs_upstream_t *up = NULL;
    char errbuf[SVC_ERRBUF_LEN];

    (void)state;
    memset(&o, 0, sizeof o); /* forgot rs_upstream_opts_init(): loud, not subtle */
    o.name = "catalog";
    assert_int_equal(rs_upstream_new(&o, &up, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "breaker.trials"));
}

static void rows_inherit_what_they_do_not_set(void **state)
{
    const rs_method_t rows[] = {
        {.path = LIST_PRODUCTS, .policy = {.attempt_timeout_ms = 8000, .jitter = RS_JITTER_EQUAL}},
    };
    rt_t *t = *state;
    const struct rs__method *m;

    t->opts.methods = rows;
    t->opts.n_methods = 1;
    t->opts.policy.max_attempts = 4;
    t->opts.policy.backoff_base_ms = 0; /* 0 in the upstream policy: the built-in default */
    rt_start(t);
    m = rs__method_lookup(t->up, LIST_PRODUCTS);
    assert_string_equal(m->label, "ListProducts");
    assert_int_equal(m->policy.attempt_timeout_ms, 8000);
    assert_int_equal(m->policy.jitter, RS_JITTER_EQUAL);
    assert_int_equal(m->policy.max_attempts, 4);
    assert_int_equal(m->policy.backoff_base_ms, RS_DEFAULT_BACKOFF_BASE_MS);
    assert_int_equal(m->policy.backoff_cap_ms, RS_DEFAULT_BACKOFF_CAP_MS);
    assert_int_equal(m->idempotency, RS_IDEMPOTENT); /* by name, resolved at build time */
    m = rs__method_lookup(t->up, GET_PRODUCT);       /* not in this table */
    assert_string_equal(m->label, "other");
    assert_int_equal(m->policy.max_attempts, 4);
    assert_int_equal(m->policy.attempt_timeout_ms, 3000);
}

static void the_by_name_rule(void **state)
{
    (void)state;
    assert_true(rs__idempotent_by_name(GET_PRODUCT));
    assert_true(rs__idempotent_by_name(LIST_PRODUCTS));
    assert_true(rs__idempotent_by_name("/a.B/Get"));
    assert_true(rs__idempotent_by_name("/a.B/Get2"));
    assert_true(rs__idempotent_by_name("GetProduct"));
    assert_false(rs__idempotent_by_name(CREATE_ORDER));
    assert_false(rs__idempotent_by_name("/a.B/Getaway"));
    assert_false(rs__idempotent_by_name("/a.B/Listen"));
    assert_false(rs__idempotent_by_name("/a.B/getProduct"));
    assert_false(rs__idempotent_by_name("/a.GetService/Delete"));
    assert_false(rs__idempotent_by_name("/a.B/"));
}

static void outcome_classes(void **state)
{
    const struct {
        svc_err_t err;
        int http;
        bool own_timer;
        rs__verdict_t verdict;
        rs__cause_t cause;
    } rows[] = {
        {SVC_OK, 0, false, RS__VERDICT_SUCCESS, RS__CAUSE_NONE},
        {SVC_EUNAVAIL, 0, false, RS__VERDICT_FAILURE, RS__CAUSE_UNAVAILABLE},
        {SVC_ETIMEDOUT, 0, true, RS__VERDICT_FAILURE, RS__CAUSE_ATTEMPT_TIMEOUT},
        {SVC_ETIMEDOUT, 0, false, RS__VERDICT_IGNORE, RS__CAUSE_NONE},
        {SVC_ECANCELLED, 0, false, RS__VERDICT_IGNORE, RS__CAUSE_NONE},
        {SVC_ENOMEM, 0, false, RS__VERDICT_IGNORE, RS__CAUSE_NONE},
        {SVC_ENOTFOUND, 0, false, RS__VERDICT_SUCCESS, RS__CAUSE_NONE},
        {SVC_EINTERNAL, 0, false, RS__VERDICT_SUCCESS, RS__CAUSE_NONE},
        {SVC_EUNAVAIL, 503, false, RS__VERDICT_FAILURE, RS__CAUSE_HTTP_503},
        {SVC_EUNAVAIL, 429, false, RS__VERDICT_FAILURE, RS__CAUSE_HTTP_429},
        {SVC_EUNAVAIL, 502, false, RS__VERDICT_FAILURE, RS__CAUSE_NONE},
        {SVC_EEXHAUSTED, 429, false, RS__VERDICT_SUCCESS, RS__CAUSE_HTTP_429},
        {SVC_EEXHAUSTED, 0, false, RS__VERDICT_SUCCESS, RS__CAUSE_NONE}, /* no pushback */
    };

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(rows); i++) {
        rs_outcome_t o = rt_outcome(rows[i].err);
        rs__class_t c;

        o.http_status = rows[i].http;
        c = rs__classify(&o, rows[i].own_timer, RS_RETRY_DEFAULT);
        assert_int_equal(c.verdict, rows[i].verdict);
        assert_int_equal(c.cause, rows[i].cause);
    }
}

/* gRPC RESOURCE_EXHAUSTED is retryable only with a pushback hint (>= 0). */
static void shed_needs_a_pushback(void **state)
{
    rs_outcome_t o = rt_outcome(SVC_EEXHAUSTED);

    (void)state;
    o.pushback_ms = 0;
    assert_int_equal(rs__classify(&o, false, RS_RETRY_DEFAULT).cause, RS__CAUSE_SHED);
    assert_int_equal(rs__classify(&o, false, RS_RETRY_DEFAULT).verdict, RS__VERDICT_SUCCESS);
    assert_int_equal(rs__classify(&o, false, RS_RETRY_DEFAULT & ~RS_RETRY_SHED).cause,
                     RS__CAUSE_NONE);
    o.pushback_ms = RS_PUSHBACK_STOP;
    assert_int_equal(rs__classify(&o, false, RS_RETRY_DEFAULT).cause, RS__CAUSE_NONE);
    assert_string_equal(rs__cause_name(RS__CAUSE_SHED), "shed");
}

/* 500, 502 and 504 are retried only when the policy opts in (the HTTP
 * binding does, for requests safe to repeat); 501 never is. */
static void http_5xx_is_opt_in(void **state)
{
    const int statuses[] = {500, 502, 504};
    rs_outcome_t o = rt_outcome(SVC_EUNAVAIL);

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(statuses); i++) {
        o.http_status = statuses[i];
        assert_int_equal(rs__classify(&o, false, RS_RETRY_DEFAULT).cause, RS__CAUSE_NONE);
        assert_int_equal(rs__classify(&o, false, RS_RETRY_ALL).cause, RS__CAUSE_HTTP_5XX);
        assert_int_equal(rs__classify(&o, false, RS_RETRY_ALL).verdict, RS__VERDICT_FAILURE);
    }
    o.http_status = 501;
    assert_int_equal(rs__classify(&o, false, RS_RETRY_ALL).cause, RS__CAUSE_NONE);
    assert_string_equal(rs__cause_name(RS__CAUSE_HTTP_5XX), "http-5xx");
}

static void names(void **state)
{
    (void)state;
    assert_string_equal(rs_reason_name(RS_REASON_OK), "ok");
    assert_string_equal(rs_reason_name(RS_REASON_BUDGET_EXHAUSTED), "budget-exhausted");
    assert_string_equal(rs_reason_name(RS_REASON_CANCELLED), "cancelled");
    assert_string_equal(rs_reason_name(RS__REASON_COUNT), "unknown");
    for (int i = 0; i < RS__REASON_COUNT; i++)
        for (int j = 0; j < i; j++)
            assert_string_not_equal(rs_reason_name((rs_reason_t)i), rs_reason_name((rs_reason_t)j));
    assert_string_equal(rs_breaker_state_name(RS_BREAKER_HALF_OPEN), "half-open");
}

#define T(f) cmocka_unit_test_setup_teardown(f, rt_setup, rt_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(defaults_are_the_named_values),
        T(invalid_options_are_refused_with_a_reason),
        T(invalid_tables_are_refused),
        T(a_zeroed_options_struct_is_refused),
        T(rows_inherit_what_they_do_not_set),
        T(the_by_name_rule),
        T(outcome_classes),
        T(shed_needs_a_pushback),
        T(http_5xx_is_opt_in),
        T(names),
    };

    return cmocka_run_group_tests_name("rs_policy", tests, NULL, NULL);
}
