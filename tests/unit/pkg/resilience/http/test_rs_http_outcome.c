/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rs_http_outcome.c - the HTTP binding's safe-retry table without a
 * network: what each status and curl result means to the engine, which
 * method row a request gets, and - through the engine itself - which of
 * them are retried (docs/resilience.md §12).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

static void statuses(void **state)
{
    const struct {
        long status;
        svc_err_t err;
    } rows[] = {
        {200, SVC_OK},        {204, SVC_OK},        {429, SVC_EUNAVAIL}, {500, SVC_EUNAVAIL},
        {502, SVC_EUNAVAIL},  {503, SVC_EUNAVAIL},  {504, SVC_EUNAVAIL}, {501, SVC_EUNIMPL},
        {505, SVC_EUNKNOWN},  {400, SVC_EINVAL},    {401, SVC_EUNAUTH},  {403, SVC_EPERM},
        {404, SVC_ENOTFOUND}, {408, SVC_ETIMEDOUT}, {409, SVC_EEXIST},   {412, SVC_EPRECOND},
        {413, SVC_ERANGE},    {418, SVC_EINVAL},    {301, SVC_EUNKNOWN},
    };

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(rows); i++) {
        print_message("status %ld\n", rows[i].status);
        assert_int_equal(rs_http__status_err(rows[i].status), rows[i].err);
    }
}

static void curl_results(void **state)
{
    (void)state;
    assert_int_equal(rs_http__curl_err(CURLE_OK), SVC_OK);
    assert_int_equal(rs_http__curl_err(CURLE_OPERATION_TIMEDOUT), SVC_ETIMEDOUT);
    assert_int_equal(rs_http__curl_err(CURLE_COULDNT_CONNECT), SVC_EUNAVAIL);
    assert_int_equal(rs_http__curl_err(CURLE_COULDNT_RESOLVE_HOST), SVC_EUNAVAIL);
    assert_int_equal(rs_http__curl_err(CURLE_GOT_NOTHING), SVC_EUNAVAIL);
    assert_int_equal(rs_http__curl_err(CURLE_RECV_ERROR), SVC_EUNAVAIL);
    assert_int_equal(rs_http__curl_err(CURLE_WRITE_ERROR), SVC_ERANGE);
    assert_int_equal(rs_http__curl_err(CURLE_PEER_FAILED_VERIFICATION), SVC_EINTERNAL);
    assert_int_equal(rs_http__curl_err(CURLE_URL_MALFORMAT), SVC_EINTERNAL);
}

static void method_rows(void **state)
{
    const char *key[] = {"Content-Type: application/json", "idempotency-key:  evt-1"};
    const char *empty[] = {"Idempotency-Key:   "};
    char row[20];

    (void)state;
    assert_true(rs_http__has_idempotency_key(key, 2));
    assert_false(rs_http__has_idempotency_key(key, 1));
    assert_false(rs_http__has_idempotency_key(empty, 1));
    assert_false(rs_http__has_idempotency_key(NULL, 0));
    rs_http__rs_path("GET", false, row);
    assert_string_equal(row, "/GET");
    rs_http__rs_path("DELETE", true, row);
    assert_string_equal(row, "/DELETE");
    rs_http__rs_path("POST", false, row);
    assert_string_equal(row, "/POST");
    rs_http__rs_path("POST", true, row);
    assert_string_equal(row, "/POST-keyed");
    rs_http__rs_path("PATCH", true, row);
    assert_string_equal(row, "/PATCH-keyed");
    rs_http__rs_path("PROPFIND", true, row);
    assert_string_equal(row, "/PROPFIND");
}

/* The table end to end through the engine, with the binding's policy
 * (RS_RETRY_ALL) and method rows: one failed attempt, then is a retry
 * scheduled? */
static bool retried(const char *row, long status, CURLcode rc)
{
    static const rs_method_t methods[] = {
        {.path = "/GET", .idempotency = RS_IDEMPOTENT},
        {.path = "/POST", .idempotency = RS_NOT_IDEMPOTENT},
        {.path = "/POST-keyed", .idempotency = RS_IDEMPOTENT},
    };
    rs_upstream_opts_t o;
    rs_upstream_t *up = NULL;
    rs_outcome_t out = RS_OUTCOME_INIT;
    rs_call_t c;
    rs_decision_t d;
    uint64_t dl;

    rs_upstream_opts_init(&o);
    o.name = "t";
    o.policy.retry_on = RS_RETRY_ALL;
    o.policy.attempt_timeout_ms = 1000;
    o.methods = methods;
    o.n_methods = SVC_COUNTOF(methods);
    assert_int_equal(rs_upstream_new(&o, &up, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(rs_call_begin(up, row, SVC_DEADLINE_NONE, &c), SVC_OK);
    assert_int_equal(rs_call_attempt(&c, &dl), SVC_OK);
    out.err = rc == CURLE_OK ? rs_http__status_err(status) : rs_http__curl_err(rc);
    out.http_status = (int)status;
    out.attempt_timer_fired = rc == CURLE_OPERATION_TIMEDOUT;
    d = rs_call_end_attempt(&c, &out);
    rs_call_finish(&c, NULL);
    rs_upstream_free(up);
    return d.action == RS_RETRY;
}

static void the_safe_retry_table(void **state)
{
    const long again[] = {429, 500, 502, 503, 504};
    const long never[] = {400, 401, 403, 404, 408, 409, 413, 422, 501, 505};

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(again); i++) {
        assert_true(retried("/GET", again[i], CURLE_OK));
        assert_true(retried("/POST-keyed", again[i], CURLE_OK));
        assert_false(retried("/POST", again[i], CURLE_OK));
    }
    for (size_t i = 0; i < SVC_COUNTOF(never); i++) {
        assert_false(retried("/GET", never[i], CURLE_OK));
        assert_false(retried("/POST-keyed", never[i], CURLE_OK));
    }
    assert_true(retried("/POST-keyed", 0, CURLE_COULDNT_CONNECT));
    assert_true(retried("/POST-keyed", 0, CURLE_OPERATION_TIMEDOUT));
    assert_false(retried("/POST", 0, CURLE_COULDNT_CONNECT));
    assert_false(retried("/GET", 0, CURLE_PEER_FAILED_VERIFICATION));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(statuses),
        cmocka_unit_test(curl_results),
        cmocka_unit_test(method_rows),
        cmocka_unit_test(the_safe_retry_table),
    };

    return cmocka_run_group_tests_name("rs_http_outcome", tests, NULL, NULL);
}
