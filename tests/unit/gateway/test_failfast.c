/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_failfast.c - the per-route fail-fast windows (gateway/failfast.h) on
 * a clock the test drives: which results are refusals, the window bounded
 * by the hint and the cap, one probe at a time, what a probe's end does,
 * the lease, stragglers, and the metrics.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "failfast.h"

#define MS     SVC_NS_PER_MS
#define T0     (1000 * MS) /* the clock's start; 0 is "no window" inside */
#define ORDERS 0           /* POST /v1/orders */
#define ORDER  1           /* GET /v1/orders/{id} */

static const gw_route_t routes[] = {
    {.method = "POST", .pattern = "/v1/orders", .rpc = "/o/CreateOrder"},
    {.method = "GET", .pattern = "/v1/orders/{id}", .rpc = "/o/GetOrder"},
    {.method = "GET", .pattern = "/healthz"}, /* local: no window, no metrics */
};

static const char refusal_text[] =
    "pricing: catalog unavailable: circuit open (reason=breaker-open attempts=0)";

/* What order's refusal looks like to the gateway: one attempt, not
 * retryable (a dependency failure), with its breaker's cooldown. */
static rs_grpc_result_t refusal(uint32_t hint_ms)
{
    rs_grpc_result_t r = {.err = SVC_EUNAVAIL,
                          .reason = RS_REASON_NOT_RETRYABLE,
                          .attempts = 1,
                          .retry_after_ms = hint_ms};

    snprintf(r.message, sizeof r.message, "%s", refusal_text);
    return r;
}

static rs_grpc_result_t outcome(svc_err_t err, rs_reason_t reason, uint32_t attempts)
{
    rs_grpc_result_t r = {.err = err, .reason = reason, .attempts = attempts};
    return r;
}

static int setup(void **state)
{
    gw_failfast_opts_t o;
    gw_failfast_t *ff;

    gw_failfast_opts_init(&o);
    o.routes = routes;
    o.n_routes = SVC_COUNTOF(routes);
    if (gw_failfast_new(&o, &ff) != SVC_OK)
        return -1;
    *state = ff;
    return 0;
}

static int teardown(void **state)
{
    gw_failfast_free(*state);
    return 0;
}

static gw_failfast_verdict_t admit(gw_failfast_t *ff, size_t route, uint64_t now, uint64_t *ticket,
                                   rs_grpc_result_t *res)
{
    return gw_failfast_admit(ff, route, now, now + 10000 * MS, ticket, res);
}

static void what_is_a_refusal(void **state)
{
    rs_grpc_result_t r = refusal(5000);

    (void)state;
    assert_true(gw_failfast_is_refusal(&r));
    r.retry_after_ms = 0; /* a 503 without a hint */
    assert_false(gw_failfast_is_refusal(&r));
    r = refusal(5000);
    r.attempts = 0; /* our own breaker or bulkhead said no */
    assert_false(gw_failfast_is_refusal(&r));
    r = refusal(5000);
    r.reason = RS_REASON_NOT_IDEMPOTENT; /* a crash or reset of a CreateOrder */
    assert_false(gw_failfast_is_refusal(&r));
    r = refusal(5000);
    r.err = SVC_EEXHAUSTED; /* shed: 429, the client slows down */
    assert_false(gw_failfast_is_refusal(&r));
    r = refusal(5000);
    r.err = SVC_ETIMEDOUT;
    assert_false(gw_failfast_is_refusal(&r));
}

static void a_refusal_opens_a_window_of_its_route_only(void **state)
{
    gw_failfast_t *ff = *state;
    rs_grpc_result_t r = refusal(5000), res;
    uint64_t ticket = 7;

    assert_int_equal(admit(ff, ORDERS, T0, &ticket, &res), GW_FAILFAST_PASS);
    assert_int_equal(ticket, 0);
    gw_failfast_end(ff, ORDERS, 0, &r, T0);
    assert_int_equal(admit(ff, ORDERS, T0 + 1 * MS, &ticket, &res), GW_FAILFAST_REFUSE);
    assert_int_equal(res.err, SVC_EUNAVAIL);
    assert_int_equal(res.reason, RS_REASON_PUSHBACK);
    assert_int_equal(res.attempts, 0);
    assert_int_equal(res.retry_after_ms, 4999); /* until the hint's end, not the cap's */
    assert_string_equal(res.message, refusal_text);
    assert_int_equal(admit(ff, ORDER, T0 + 1 * MS, &ticket, &res), GW_FAILFAST_PASS);
    /* the cap: 1 s, then one probe */
    assert_int_equal(admit(ff, ORDERS, T0 + 999 * MS, &ticket, &res), GW_FAILFAST_REFUSE);
    assert_int_equal(admit(ff, ORDERS, T0 + 1000 * MS, &ticket, &res), GW_FAILFAST_PROBE);
    assert_int_not_equal(ticket, 0);
}

static void a_short_hint_is_a_short_window(void **state)
{
    gw_failfast_t *ff = *state;
    rs_grpc_result_t r = refusal(200), res;
    uint64_t ticket;

    gw_failfast_end(ff, ORDERS, 0, &r, T0);
    assert_int_equal(admit(ff, ORDERS, T0 + 199 * MS, &ticket, &res), GW_FAILFAST_REFUSE);
    assert_int_equal(res.retry_after_ms, 1);
    assert_int_equal(admit(ff, ORDERS, T0 + 200 * MS, &ticket, &res), GW_FAILFAST_PROBE);
}

static void one_probe_at_a_time_until_its_verdict(void **state)
{
    gw_failfast_t *ff = *state;
    rs_grpc_result_t r = refusal(5000), res, ok = outcome(SVC_OK, RS_REASON_OK, 1);
    uint64_t probe, other;

    gw_failfast_end(ff, ORDERS, 0, &r, T0);
    assert_int_equal(admit(ff, ORDERS, T0 + 1000 * MS, &probe, &res), GW_FAILFAST_PROBE);
    /* while it is out, the others are still answered, with the hint's rest */
    assert_int_equal(admit(ff, ORDERS, T0 + 1001 * MS, &other, &res), GW_FAILFAST_REFUSE);
    assert_int_equal(res.retry_after_ms, 3999);
    /* the probe is refused again: the next window, from its hint */
    r = refusal(3000);
    gw_failfast_end(ff, ORDERS, probe, &r, T0 + 1002 * MS);
    assert_int_equal(admit(ff, ORDERS, T0 + 1500 * MS, &other, &res), GW_FAILFAST_REFUSE);
    assert_int_equal(res.retry_after_ms, 2502);
    assert_int_equal(admit(ff, ORDERS, T0 + 2002 * MS, &probe, &res), GW_FAILFAST_PROBE);
    /* the upstream answers: the window is over */
    gw_failfast_end(ff, ORDERS, probe, &ok, T0 + 2010 * MS);
    assert_int_equal(admit(ff, ORDERS, T0 + 2011 * MS, &other, &res), GW_FAILFAST_PASS);
    assert_int_equal(other, 0);
}

static void any_verdict_closes_but_no_verdict_only_hands_the_probe_on(void **state)
{
    gw_failfast_t *ff = *state;
    rs_grpc_result_t r = refusal(5000), res;
    rs_grpc_result_t cancelled = outcome(SVC_ECANCELLED, RS_REASON_CANCELLED, 1);
    rs_grpc_result_t unsent = outcome(SVC_EUNAVAIL, RS_REASON_BREAKER_OPEN, 0);
    rs_grpc_result_t invalid = outcome(SVC_EINVAL, RS_REASON_NOT_RETRYABLE, 1);
    uint64_t probe, other;

    gw_failfast_end(ff, ORDERS, 0, &r, T0);
    assert_int_equal(admit(ff, ORDERS, T0 + 1000 * MS, &probe, &res), GW_FAILFAST_PROBE);
    gw_failfast_end(ff, ORDERS, probe, &cancelled, T0 + 1001 * MS);
    assert_int_equal(admit(ff, ORDERS, T0 + 1002 * MS, &probe, &res), GW_FAILFAST_PROBE);
    gw_failfast_end(ff, ORDERS, probe, &unsent, T0 + 1003 * MS);
    assert_int_equal(admit(ff, ORDERS, T0 + 1004 * MS, &probe, &res), GW_FAILFAST_PROBE);
    /* a 400 is the upstream's verdict too: it priced nothing, but it answered */
    gw_failfast_end(ff, ORDERS, probe, &invalid, T0 + 1005 * MS);
    assert_int_equal(admit(ff, ORDERS, T0 + 1006 * MS, &other, &res), GW_FAILFAST_PASS);
}

static void a_probe_that_never_reports_is_given_up_at_its_lease(void **state)
{
    gw_failfast_t *ff = *state;
    rs_grpc_result_t r = refusal(5000), res;
    uint64_t probe, other;

    gw_failfast_end(ff, ORDERS, 0, &r, T0);
    assert_int_equal(gw_failfast_admit(ff, ORDERS, T0 + 1000 * MS, T0 + 4000 * MS, &probe, &res),
                     GW_FAILFAST_PROBE);
    assert_int_equal(admit(ff, ORDERS, T0 + 3999 * MS, &other, &res), GW_FAILFAST_REFUSE);
    assert_int_equal(admit(ff, ORDERS, T0 + 4000 * MS, &other, &res), GW_FAILFAST_PROBE);
    assert_int_not_equal(other, 0);
}

static void a_stragglers_refusal_moves_the_window_and_outdates_the_probe(void **state)
{
    gw_failfast_t *ff = *state;
    rs_grpc_result_t r = refusal(5000), res, ok = outcome(SVC_OK, RS_REASON_OK, 1);
    uint64_t probe, other;

    gw_failfast_end(ff, ORDERS, 0, &r, T0);
    assert_int_equal(admit(ff, ORDERS, T0 + 1000 * MS, &probe, &res), GW_FAILFAST_PROBE);
    /* a call from before the window is refused late: the upstream's newest word */
    gw_failfast_end(ff, ORDERS, 0, &r, T0 + 1001 * MS);
    /* the old probe's success no longer closes the new window */
    gw_failfast_end(ff, ORDERS, probe, &ok, T0 + 1002 * MS);
    assert_int_equal(admit(ff, ORDERS, T0 + 1003 * MS, &other, &res), GW_FAILFAST_REFUSE);
    /* an ordinary call's success does not either: only probes close */
    gw_failfast_end(ff, ORDERS, 0, &ok, T0 + 1004 * MS);
    assert_int_equal(admit(ff, ORDERS, T0 + 1005 * MS, &other, &res), GW_FAILFAST_REFUSE);
}

static void the_metrics_count_answers_windows_and_probes(void **state)
{
    gw_failfast_t *ff = *state;
    rs_grpc_result_t r = refusal(5000), res;
    uint64_t probe, other;
    size_t need = 0, got = 0;
    char *text;

    gw_failfast_end(ff, ORDERS, 0, &r, T0);
    gw_failfast_end(ff, ORDERS, 0, &r, T0 + 1 * MS); /* a straggler: the same window */
    for (int i = 0; i < 3; i++)
        assert_int_equal(admit(ff, ORDERS, T0 + 2 * MS, &other, &res), GW_FAILFAST_REFUSE);
    assert_int_equal(admit(ff, ORDERS, T0 + 1001 * MS, &probe, &res), GW_FAILFAST_PROBE);
    gw_failfast_end(ff, ORDERS, probe, &r, T0 + 1002 * MS); /* the next window */
    assert_int_equal(gw_failfast_render(ff, NULL, 0, &need), SVC_ERANGE);
    text = malloc(need + 1);
    assert_non_null(text);
    assert_int_equal(gw_failfast_render(ff, text, need + 1, &got), SVC_OK);
    assert_int_equal(got, need);
    assert_non_null(strstr(text, "# TYPE gateway_failfast_answers_total counter\n"
                                 "gateway_failfast_answers_total{route=\"/v1/orders\","
                                 "method=\"POST\"} 3\n"
                                 "gateway_failfast_answers_total{route=\"/v1/orders/{id}\","
                                 "method=\"GET\"} 0\n#"));
    assert_non_null(strstr(text, "gateway_failfast_windows_total{route=\"/v1/orders\","
                                 "method=\"POST\"} 2\n"));
    assert_non_null(strstr(text, "gateway_failfast_probes_total{route=\"/v1/orders\","
                                 "method=\"POST\"} 1\n"));
    assert_null(strstr(text, "healthz"));
    free(text);
    assert_int_equal(gw_failfast_render(NULL, NULL, 0, &need), SVC_OK);
    assert_int_equal(need, 0);
}

static void options_are_checked(void **state)
{
    gw_failfast_opts_t o;
    gw_failfast_t *ff = (void *)1;

    (void)state;
    gw_failfast_opts_init(&o);
    assert_int_equal(o.max_window_ms, GW_FAILFAST_DEFAULT_MAX_WINDOW_MS);
    assert_int_equal(gw_failfast_new(&o, &ff), SVC_EINVAL); /* no routes */
    assert_null(ff);
    o.routes = routes;
    o.n_routes = SVC_COUNTOF(routes);
    o.max_window_ms = 0;
    assert_int_equal(gw_failfast_new(&o, &ff), SVC_EINVAL);
    gw_failfast_free(NULL);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(what_is_a_refusal),
        T(a_refusal_opens_a_window_of_its_route_only),
        T(a_short_hint_is_a_short_window),
        T(one_probe_at_a_time_until_its_verdict),
        T(any_verdict_closes_but_no_verdict_only_hands_the_probe_on),
        T(a_probe_that_never_reports_is_given_up_at_its_lease),
        T(a_stragglers_refusal_moves_the_window_and_outdates_the_probe),
        T(the_metrics_count_answers_windows_and_probes),
        cmocka_unit_test(options_are_checked),
    };
#undef T
    return cmocka_run_group_tests_name("gateway_failfast", tests, NULL, NULL);
}
