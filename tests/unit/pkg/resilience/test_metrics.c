/* SPDX-License-Identifier: Apache-2.0 */
/* test_metrics.c - the Prometheus page after a scripted sequence. */
#include <string.h>

#include "rs_test.h"

#define UP "upstream=\"catalog\""
#define GP UP ",method=\"GetProduct\""
#define CO UP ",method=\"CreateOrder\""

static void has(const char *page, const char *line)
{
    if (strstr(page, line) == NULL)
        fail_msg("missing line: %s", line);
}

static size_t count(const char *page, const char *s)
{
    size_t n = 0;

    for (const char *p = strstr(page, s); p != NULL; p = strstr(p + 1, s))
        n++;
    return n;
}

/* 2 ok, 1 ok after a retry, 5 CreateOrder failures (never retried) that
 * open the breaker, 1 rejected GetProduct, 1 call to a method not in the table. */
static void scripted_sequence(rt_t *t)
{
    rt_script_t s;
    rs_result_t res;

    rt_script_init(&s, t, SVC_OK, 1);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_OK);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_OK);
    assert_int_equal(rt_run(t, UNDECLARED_GET, SVC_DEADLINE_NONE, &s, &res), SVC_OK);
    rt_script_init(&s, t, SVC_EUNAVAIL, 2);
    s.outcomes[1] = rt_outcome(SVC_OK);
    assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_OK);
    for (int i = 0; i < 5; i++)
        rt_call(t, CREATE_ORDER, SVC_EUNAVAIL, &res);
    rt_call(t, GET_PRODUCT, SVC_OK, &res);
    assert_int_equal(res.reason, RS_REASON_BREAKER_OPEN);
}

static void page_after_a_scripted_sequence(void **state)
{
    rt_t *t = *state;
    const char *page;

    rt_start(t);
    scripted_sequence(t);
    page = rt_metrics(t);
    has(page, "shopmicro_resilience_calls_total{" GP ",result=\"ok\"} 2\n");
    has(page, "shopmicro_resilience_calls_total{" GP ",result=\"retried\"} 1\n");
    has(page, "shopmicro_resilience_calls_total{" GP ",result=\"breaker-open\"} 1\n");
    has(page, "shopmicro_resilience_calls_total{" GP ",result=\"deadline\"} 0\n");
    has(page, "shopmicro_resilience_calls_total{" CO ",result=\"not-idempotent\"} 5\n");
    has(page, "shopmicro_resilience_calls_total{" UP ",method=\"other\",result=\"ok\"} 1\n");
    has(page, "shopmicro_resilience_attempts_total{" GP "} 4\n");
    has(page, "shopmicro_resilience_attempts_total{" CO "} 5\n");
    has(page, "shopmicro_resilience_retries_total{" GP ",cause=\"unavailable\"} 1\n");
    has(page, "shopmicro_resilience_retries_total{" GP ",cause=\"attempt-timeout\"} 0\n");
    has(page, "shopmicro_resilience_retries_denied_total{" CO ",reason=\"not-idempotent\"} 5\n");
    has(page, "shopmicro_resilience_rejections_total{" GP ",reason=\"breaker-open\"} 1\n");
    has(page, "shopmicro_resilience_rejections_total{" GP ",reason=\"bulkhead-full\"} 0\n");
    /* Latency of completed calls only: 1 ms each, and 1 + 100 + 1 ms for the
     * retried one; the rejection is not in it. */
    has(page, "shopmicro_resilience_call_duration_seconds_bucket{" GP ",le=\"0.001\"} 2\n");
    has(page, "shopmicro_resilience_call_duration_seconds_bucket{" GP ",le=\"0.1\"} 2\n");
    has(page, "shopmicro_resilience_call_duration_seconds_bucket{" GP ",le=\"0.25\"} 3\n");
    has(page, "shopmicro_resilience_call_duration_seconds_bucket{" GP ",le=\"+Inf\"} 3\n");
    has(page, "shopmicro_resilience_call_duration_seconds_sum{" GP "} 0.104000000\n");
    has(page, "shopmicro_resilience_call_duration_seconds_count{" GP "} 3\n");
    has(page, "shopmicro_resilience_in_flight{" UP "} 0\n");
    has(page, "shopmicro_resilience_bulkhead_limit{" UP "} 0\n");
    has(page, "shopmicro_resilience_breaker_state{" UP ",state=\"open\"} 1\n");
    has(page, "shopmicro_resilience_breaker_state{" UP ",state=\"closed\"} 0\n");
    has(page,
        "shopmicro_resilience_breaker_transitions_total{" UP ",from=\"closed\",to=\"open\"} 1\n");
    has(page, "shopmicro_resilience_breaker_transitions_total{" UP
              ",from=\"half-open\",to=\"closed\"} 0\n");
    /* floor 100 + 10% of 9 admitted originals (0) - 1 retry */
    has(page, "shopmicro_resilience_retry_budget_remaining{" UP "} 99\n");
    has(page, "# TYPE shopmicro_resilience_call_duration_seconds histogram\n");
    assert_int_equal(count(page, "# TYPE shopmicro_resilience_calls_total counter\n"), 1);
    assert_int_equal(count(page, "# HELP "), count(page, "# TYPE "));
    assert_int_equal(count(page, "# TYPE "), 11);
}

static void truncation_reports_the_size_needed(void **state)
{
    rt_t *t = *state;
    char small[100];
    size_t need, len;
    char *big;

    rt_start(t);
    assert_int_equal(rs_metrics_render(&t->up, 1, NULL, 0, &need), SVC_ERANGE);
    assert_true(need > 1000);
    assert_int_equal(rs_metrics_render(&t->up, 1, small, sizeof small, &len), SVC_ERANGE);
    assert_int_equal(len, need);
    assert_int_equal(strlen(small), sizeof small - 1); /* truncated, terminated */
    big = malloc(need + 1);
    assert_non_null(big);
    assert_int_equal(rs_metrics_render(&t->up, 1, big, need + 1, &len), SVC_OK);
    assert_int_equal(strlen(big), need);
    free(big);
}

static void several_upstreams_share_the_families(void **state)
{
    rt_t *t = *state;
    rs_upstream_opts_t o;
    rs_upstream_t *ups[2];
    static char page[1 << 17];
    size_t len;

    rt_start(t);
    rs_upstream_opts_init(&o);
    o.name = "order";
    o.max_concurrent = 64;
    assert_int_equal(rs_upstream_new(&o, &ups[1], SVC_ERRBUF_SCRATCH), SVC_OK);
    ups[0] = t->up;
    assert_int_equal(rs_metrics_render(ups, 2, page, sizeof page, &len), SVC_OK);
    assert_int_equal(count(page, "# TYPE shopmicro_resilience_in_flight gauge\n"), 1);
    has(page, "shopmicro_resilience_in_flight{upstream=\"catalog\"} 0\n");
    has(page, "shopmicro_resilience_bulkhead_limit{upstream=\"order\"} 64\n");
    has(page, "shopmicro_resilience_calls_total{upstream=\"order\",method=\"other\","
              "result=\"ok\"} 0\n");
    rs_upstream_free(ups[1]);
}

#define T(f) cmocka_unit_test_setup_teardown(f, rt_setup, rt_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(page_after_a_scripted_sequence),
        T(truncation_reports_the_size_needed),
        T(several_upstreams_share_the_families),
    };

    svc_log_set_level(SVC_LOG_ERROR);
    return cmocka_run_group_tests_name("rs_metrics", tests, NULL, NULL);
}
