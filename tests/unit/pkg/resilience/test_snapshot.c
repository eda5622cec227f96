/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_snapshot.c - rs_snapshot_json(), the live page's feed, after scripted
 * sequences on the fake clock: the document of a fresh upstream in full, an
 * outage (retries, give-ups, the trip, folded rejections, the recovery), what
 * is not a decision, the ring bounds, the text rules and the size contract.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "rs_test.h"

#define WALL_MS 1700000000000ull /* the wall clock the renders are given */

static const char *feed(rt_t *t)
{
    static char buf[1 << 16];
    size_t len;

    assert_int_equal(rs__snapshot_json_at(&t->up, 1, WALL_MS, buf, sizeof buf, &len), SVC_OK);
    assert_int_equal(len, strlen(buf));
    return buf;
}

static void has(const char *doc, const char *part)
{
    if (strstr(doc, part) == NULL)
        fail_msg("missing: %s\nin: %s", part, doc);
}

static size_t count(const char *doc, const char *s)
{
    size_t n = 0;

    for (const char *p = strstr(doc, s); p != NULL; p = strstr(p + 1, s))
        n++;
    return n;
}

static void fresh_upstream_in_full(void **state)
{
    rt_t *t = *state;

    rt_start(t);
    assert_string_equal(
        feed(t),
        "{\"now_ms\":1700000000000,\"upstreams\":[{\"name\":\"catalog\","
        "\"breaker\":{\"state\":\"closed\",\"ms_until_trial\":0,\"consecutive_failures\":0,"
        "\"failures_to_open\":5,\"cooldown_ms\":10000,\"transitions_total\":0,"
        "\"transitions\":[]},"
        "\"calls\":{\"total\":0,\"originals\":0,\"attempts\":0,\"retries\":0,\"rejected\":0},"
        "\"budget\":{\"remaining\":100,\"allowance\":100,\"spent\":0,\"window_ms\":10000},"
        "\"bulkhead\":{\"in_use\":0,\"limit\":0},"
        "\"decisions_total\":0,\"decisions_dropped\":0,\"decisions\":[]}]}");
}

static void no_budget_and_a_bulkhead(void **state)
{
    rt_t *t = *state;
    const char *doc;

    t->opts.budget.window_ms = 0;
    t->opts.max_concurrent = 4;
    rt_start(t);
    doc = feed(t);
    has(doc, "\"budget\":null,\"bulkhead\":{\"in_use\":0,\"limit\":4}");
}

/* Five GetProduct calls refused on every attempt (3 attempts, 100 and 200 ms
 * backoffs, 1 ms each): 10 retries, 5 give-ups, the trip; 3 rejections. */
static void outage(rt_t *t)
{
    rt_script_t s;
    rs_result_t res;

    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    s.outcomes[0].detail = "connection refused";
    for (int i = 0; i < 5; i++)
        assert_int_equal(rt_run(t, GET_PRODUCT, SVC_DEADLINE_NONE, &s, &res), SVC_EUNAVAIL);
    for (int i = 0; i < 3; i++)
        rt_call(t, GET_PRODUCT, SVC_OK, &res);
    assert_int_equal(res.reason, RS_REASON_BREAKER_OPEN);
}

static void an_outage_as_it_happens(void **state)
{
    rt_t *t = *state;
    const char *doc;

    rt_start(t);
    outage(t);
    doc = feed(t);
    has(doc, "\"breaker\":{\"state\":\"open\",\"ms_until_trial\":10000,"
             "\"consecutive_failures\":5,\"failures_to_open\":5,\"cooldown_ms\":10000,"
             "\"transitions_total\":1,\"transitions\":[{\"seq\":1,\"at_ms\":1700000000000,"
             "\"age_ms\":0,\"from\":\"closed\",\"to\":\"open\","
             "\"why\":\"after 5 consecutive failures\"}]}");
    has(doc, "\"calls\":{\"total\":8,\"originals\":5,\"attempts\":15,\"retries\":10,"
             "\"rejected\":3}");
    has(doc, "\"budget\":{\"remaining\":90,\"allowance\":100,\"spent\":10,\"window_ms\":10000}");
    /* The first call's three decisions, oldest first, 1515 ms ago and after. */
    has(doc, "\"decisions_total\":18,\"decisions_dropped\":0,\"decisions\":[{\"seq\":1,"
             "\"at_ms\":1699999998486,\"age_ms\":1514,\"method\":\"GetProduct\","
             "\"decision\":\"retry\",\"reason\":\"unavailable\",\"attempt\":1,"
             "\"max_attempts\":3,\"delay_ms\":100,\"err\":\"UNAVAILABLE\",\"repeat\":1,"
             "\"detail\":\"connection refused\"},{\"seq\":2,");
    has(doc, "\"decision\":\"retry\",\"reason\":\"unavailable\",\"attempt\":2,"
             "\"max_attempts\":3,\"delay_ms\":200,");
    has(doc, "\"decision\":\"fail\",\"reason\":\"attempts-exhausted\",\"attempt\":3,"
             "\"max_attempts\":3,\"delay_ms\":0,\"err\":\"UNAVAILABLE\",\"repeat\":1,"
             "\"detail\":\"connection refused\"}");
    /* Three rejections alike are one row. */
    has(doc, "{\"seq\":16,\"at_ms\":1700000000000,\"age_ms\":0,\"method\":\"GetProduct\","
             "\"decision\":\"reject\",\"reason\":\"breaker-open\",\"attempt\":0,"
             "\"max_attempts\":3,\"delay_ms\":0,\"err\":\"UNAVAILABLE\",\"repeat\":3,"
             "\"detail\":\"\"}]}]}");
}

static void the_recovery_on_the_timeline(void **state)
{
    rt_t *t = *state;
    rs_result_t res;
    const char *doc;

    rt_start(t);
    outage(t);
    fake_clock_advance_ms(&t->clock, 10000);
    rt_call(t, GET_PRODUCT, SVC_OK, &res); /* the trial: a success is not a decision */
    assert_int_equal(res.reason, RS_REASON_OK);
    fake_clock_advance_ms(&t->clock, 500);
    doc = feed(t);
    has(doc, "\"state\":\"closed\",\"ms_until_trial\":0,\"consecutive_failures\":0,");
    /* Opened 10 s + 1 ms before the trial's verdict (its attempt took 1 ms). */
    has(doc, "\"transitions_total\":3,\"transitions\":[{\"seq\":1,\"at_ms\":1699999989499,"
             "\"age_ms\":10501,\"from\":\"closed\",\"to\":\"open\",");
    has(doc, "{\"seq\":2,\"at_ms\":1699999999499,\"age_ms\":501,\"from\":\"open\","
             "\"to\":\"half-open\",\"why\":\"after 10000ms cooldown\"}");
    has(doc, "{\"seq\":3,\"at_ms\":1699999999500,\"age_ms\":500,\"from\":\"half-open\","
             "\"to\":\"closed\",\"why\":\"after 1 successful trial\"}]}");
    has(doc, "\"decisions_total\":18,");
}

static void successes_and_business_answers_are_not_decisions(void **state)
{
    rt_t *t = *state;
    rt_script_t s;
    rs_result_t res;
    const char *doc;

    rt_start(t);
    for (int i = 0; i < 3; i++) {
        rt_call(t, GET_PRODUCT, SVC_OK, &res);
        rt_call(t, GET_PRODUCT, SVC_ENOTFOUND, &res);
    }
    assert_int_equal(res.reason, RS_REASON_NOT_RETRYABLE);
    has(feed(t), "\"decisions_total\":0,\"decisions_dropped\":0,\"decisions\":[]");
    rt_script_init(&s, t, SVC_EUNAVAIL, 2);
    s.outcomes[1] = rt_outcome(SVC_OK);
    assert_int_equal(rt_run(t, LIST_PRODUCTS, SVC_DEADLINE_NONE, &s, &res), SVC_OK);
    doc = feed(t);
    has(doc, "\"decisions_total\":2,");
    has(doc, "\"method\":\"ListProducts\",\"decision\":\"retry\",\"reason\":\"unavailable\","
             "\"attempt\":1,");
    has(doc, "\"method\":\"ListProducts\",\"decision\":\"done\",\"reason\":\"retried\","
             "\"attempt\":2,\"max_attempts\":3,\"delay_ms\":0,\"err\":\"OK\",\"repeat\":1,");
}

static void the_rings_keep_the_last(void **state)
{
    rt_t *t = *state;
    rs_result_t res;
    const char *doc;

    t->opts.breaker.failures = 1;
    t->opts.policy.max_attempts = 1;
    rt_start(t);
    /* 40 give-ups of alternating methods (no run to fold), 32 kept. */
    for (int i = 0; i < 40; i++) {
        rt_call(t, i % 2 ? CREATE_PRODUCT : CREATE_ORDER, SVC_EUNAVAIL, &res);
        fake_clock_advance_ms(&t->clock, 10000); /* the next is the trial */
    }
    doc = feed(t);
    /* closed -> open, then 39 x (open -> half-open, half-open -> open) */
    has(doc, "\"transitions_total\":79,\"transitions\":[{\"seq\":64,");
    assert_int_equal(count(doc, "\"from\":"), RS__JOURNAL_TRANSITIONS);
    has(doc, "\"decisions_total\":40,\"decisions_dropped\":0,\"decisions\":[{\"seq\":9,");
    assert_int_equal(count(doc, "\"decision\":"), RS__JOURNAL_DECISIONS);
    has(doc, "{\"seq\":40,");
}

static void texts_are_safe_json(void **state)
{
    rt_t *t = *state;
    char long_text[300];
    rt_script_t s;
    rs_result_t res;
    const char *doc;

    rt_start(t);
    rt_script_init(&s, t, SVC_EUNAVAIL, 1);
    s.outcomes[0].detail = "said \"no\" \\ then\n\xc3\xa9nd";
    (void)rt_run(t, CREATE_ORDER, SVC_DEADLINE_NONE, &s, &res);
    has(feed(t), "\"detail\":\"said \\\"no\\\" \\\\ then???nd\"}");
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    s.outcomes[0].detail = long_text;
    (void)rt_run(t, CREATE_PRODUCT, SVC_DEADLINE_NONE, &s, &res);
    doc = feed(t);
    assert_non_null(strstr(doc, long_text + sizeof long_text - RS__JOURNAL_DETAIL_LEN));
    assert_null(strstr(doc, long_text + sizeof long_text - RS__JOURNAL_DETAIL_LEN - 1));
}

static void snprintf_contract(void **state)
{
    rt_t *t = *state;
    char buf[8192];
    size_t need, len;

    rt_start(t);
    outage(t);
    assert_int_equal(rs__snapshot_json_at(&t->up, 1, WALL_MS, NULL, 0, &need), SVC_ERANGE);
    assert_true(need > 1000 && need < sizeof buf);
    assert_int_equal(rs__snapshot_json_at(&t->up, 1, WALL_MS, buf, need, &len), SVC_ERANGE);
    assert_int_equal(len, need);
    assert_int_equal(strlen(buf), need - 1);
    assert_int_equal(rs__snapshot_json_at(&t->up, 1, WALL_MS, buf, need + 1, &len), SVC_OK);
    assert_int_equal(strlen(buf), need);
    /* The public one: the same document but for the wall clock. */
    assert_int_equal(rs_snapshot_json(&t->up, 1, buf, sizeof buf, &len), SVC_OK);
    assert_int_equal(len, need);
    /* Two upstreams are two elements. */
    {
        rs_upstream_t *two[] = {t->up, t->up};
        assert_int_equal(rs__snapshot_json_at(two, 2, WALL_MS, NULL, 0, &len), SVC_ERANGE);
        assert_int_equal(len, 2 * need - strlen("{\"now_ms\":1700000000000,\"upstreams\":[]}") + 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(fresh_upstream_in_full, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(no_budget_and_a_bulkhead, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(an_outage_as_it_happens, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(the_recovery_on_the_timeline, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(successes_and_business_answers_are_not_decisions, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(the_rings_keep_the_last, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(texts_are_safe_json, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(snprintf_contract, rt_setup, rt_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
