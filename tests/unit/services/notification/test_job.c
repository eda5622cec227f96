/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The notification service's pure parts (services/notification/job.c,
 * config.c) without a broker: which order events become jobs, what a job's
 * body is (a CloudEvent in structured JSON mode, its data protojson), which
 * records are poison and why, the verdict on each delivery outcome, the
 * dead-letter reason, and the retry tiers' parser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "job.h"
#include "shopmicro/events/v1/events.pb-c.h"

#define EVENT_ID "5f0e6a1c-8b2d-4e3f-a1c9-7d6b5a4e3f21"

typedef struct rec {
    kfk_header_t h[8];
    uint8_t value[1024];
    kfk_record_t r;
} rec_t;

static void header(rec_t *x, const char *name, const char *value)
{
    x->h[x->r.n_headers++] = (kfk_header_t){name, value, strlen(value)};
}

static void make(rec_t *x, const char *type, const ProtobufCMessage *msg)
{
    memset(x, 0, sizeof *x);
    x->r.topic = NTF_TOPIC;
    x->r.headers = x->h;
    x->r.ce_id = EVENT_ID;
    header(x, "ce_id", EVENT_ID);
    if (type != NULL)
        header(x, "ce_type", type);
    header(x, "ce_source", "/shopmicro/order");
    header(x, "ce_time", "2026-12-03T20:00:00Z");
    if (msg != NULL) {
        x->r.value_len = protobuf_c_message_pack(msg, x->value);
        x->r.value = x->value;
    }
}

static void cancelled_becomes_a_cloudevent_json_body(void **state)
{
    Shopmicro__Events__V1__OrderCancelled m = SHOPMICRO__EVENTS__V1__ORDER_CANCELLED__INIT;
    char reason[KFK_REASON_LEN] = "", *body = NULL;
    size_t len = 0;
    rec_t x;

    (void)state;
    m.order_id = (char *)"o-1";
    m.reason = (char *)"insufficient \"stock\"";
    make(&x, NTF_TYPE_CANCELLED, &m.base);
    assert_int_equal(ntf_job_from_record(&x.r, &body, &len, reason), NTF_JOB);
    assert_non_null(body);
    assert_int_equal(strlen(body), len);
    assert_non_null(strstr(body, "\"specversion\":\"1.0\",\"id\":\"" EVENT_ID "\""));
    assert_non_null(strstr(body, "\"type\":\"shopmicro.order.v1.OrderCancelled\""));
    assert_non_null(strstr(body, "\"source\":\"/shopmicro/order\""));
    assert_non_null(strstr(body, "\"time\":\"2026-12-03T20:00:00Z\""));
    assert_non_null(strstr(body, "\"datacontenttype\":\"application/json\""));
    /* protojson field names, and the quote escaped */
    assert_non_null(strstr(body, "\"data\":{\"orderId\":\"o-1\""));
    assert_non_null(strstr(body, "insufficient \\\"stock\\\""));
    assert_int_equal(body[len - 1], '}');
    free(body);
}

static void created_is_skipped_and_confirmed_is_a_job(void **state)
{
    Shopmicro__Events__V1__OrderCreated c = SHOPMICRO__EVENTS__V1__ORDER_CREATED__INIT;
    Shopmicro__Events__V1__OrderConfirmed k = SHOPMICRO__EVENTS__V1__ORDER_CONFIRMED__INIT;
    char reason[KFK_REASON_LEN] = "", *body = NULL;
    size_t len = 0;
    rec_t x;

    (void)state;
    c.order_id = (char *)"o-2";
    make(&x, NTF_TYPE_CREATED, &c.base);
    assert_int_equal(ntf_job_from_record(&x.r, &body, &len, reason), NTF_SKIP);
    assert_null(body);
    k.order_id = (char *)"o-2";
    make(&x, NTF_TYPE_CONFIRMED, &k.base);
    assert_int_equal(ntf_job_from_record(&x.r, &body, &len, reason), NTF_JOB);
    assert_non_null(strstr(body, "\"data\":{\"orderId\":\"o-2\""));
    free(body);
}

static void expect_poison(rec_t *x, const char *needle)
{
    char reason[KFK_REASON_LEN] = "", *body = NULL;
    size_t len = 0;

    assert_int_equal(ntf_job_from_record(&x->r, &body, &len, reason), NTF_POISON);
    assert_null(body);
    if (strstr(reason, needle) == NULL)
        fail_msg("reason \"%s\" does not name \"%s\"", reason, needle);
}

static void poison_records_are_named(void **state)
{
    Shopmicro__Events__V1__OrderConfirmed k = SHOPMICRO__EVENTS__V1__ORDER_CONFIRMED__INIT;
    rec_t x;

    (void)state;
    k.order_id = (char *)"o-3";
    make(&x, "shopmicro.order.v2.OrderConfirmed", &k.base);
    expect_poison(&x, "newer schema");
    make(&x, "shopmicro.payment.v1.Paid", &k.base);
    expect_poison(&x, "no order event");
    make(&x, NULL, &k.base);
    expect_poison(&x, "no order event");
    make(&x, NTF_TYPE_CONFIRMED, &k.base);
    x.r.ce_id = "has space";
    expect_poison(&x, "Idempotency-Key");
    make(&x, NTF_TYPE_CONFIRMED, NULL);
    x.value[0] = 0xff;
    x.r.value = x.value;
    x.r.value_len = 3;
    expect_poison(&x, "not the protobuf");
}

static rs_http_result_t outcome(svc_err_t err, int status, rs_reason_t reason)
{
    rs_http_result_t r;

    memset(&r, 0, sizeof r);
    r.err = err;
    r.status = status;
    r.reason = reason;
    return r;
}

static void verdicts_and_dead_reasons(void **state)
{
    static const struct {
        svc_err_t err;
        int status;
        rs_reason_t reason;
        ntf_next_t next;
        const char *dead;
    } rows[] = {
        {SVC_OK, 200, RS_REASON_OK, NTF_ACK, "http-200"},
        {SVC_OK, 204, RS_REASON_RETRIED, NTF_ACK, "http-204"},
        {SVC_EUNAVAIL, 500, RS_REASON_ATTEMPTS_EXHAUSTED, NTF_RETRY, "attempts-exhausted"},
        {SVC_EUNAVAIL, 0, RS_REASON_BREAKER_OPEN, NTF_RETRY, "breaker-open"},
        {SVC_EEXHAUSTED, 429, RS_REASON_BUDGET_EXHAUSTED, NTF_RETRY, "budget-exhausted"},
        {SVC_ETIMEDOUT, 0, RS_REASON_DEADLINE, NTF_RETRY, "deadline"},
        {SVC_EUNAVAIL, 408, RS_REASON_ATTEMPTS_EXHAUSTED, NTF_RETRY, "attempts-exhausted"},
        {SVC_EINVAL, 400, RS_REASON_NOT_RETRYABLE, NTF_DEAD, "http-400"},
        {SVC_EPERM, 403, RS_REASON_NOT_RETRYABLE, NTF_DEAD, "http-403"},
        {SVC_ENOTFOUND, 410, RS_REASON_NOT_RETRYABLE, NTF_DEAD, "http-410"},
        {SVC_ECANCELLED, 0, RS_REASON_CANCELLED, NTF_REQUEUE, "cancelled"},
    };
    char why[64];

    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        rs_http_result_t r = outcome(rows[i].err, rows[i].status, rows[i].reason);
        ntf_next_t next = ntf_next_of(&r);

        if (next != rows[i].next)
            fail_msg("row %zu: status %d reason %s: next %d, want %d", i, rows[i].status,
                     rs_reason_name(rows[i].reason), next, rows[i].next);
        ntf_dead_reason(&r, next, why, sizeof why);
        assert_string_equal(why, rows[i].dead);
    }
}

static void tiers_parse_and_refuse(void **state)
{
    char err[SVC_ERRBUF_LEN] = "";
    uint32_t t[RMQ_MAX_TIERS];
    size_t n = 0;

    (void)state;
    assert_int_equal(ntf_parse_tiers("1000,10000,60000", t, &n, err), SVC_OK);
    assert_int_equal(n, 3);
    assert_int_equal(t[0], 1000);
    assert_int_equal(t[2], 60000);
    assert_int_equal(ntf_parse_tiers("5", t, &n, err), SVC_OK);
    assert_int_equal(n, 1);
    static const char *const bad[] = {"",           "0",        "1000,500",
                                      "1000,,2000", "1000,x",   "1,2,3,4,5,6,7,8,9",
                                      "-1",         "86400001", "1000,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        if (ntf_parse_tiers(bad[i], t, &n, err) != SVC_EINVAL)
            fail_msg("\"%s\" was accepted", bad[i]);
        assert_non_null(strstr(err, "NOTIFY_RETRY_TIERS_MS"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cancelled_becomes_a_cloudevent_json_body),
        cmocka_unit_test(created_is_skipped_and_confirmed_is_a_job),
        cmocka_unit_test(poison_records_are_named),
        cmocka_unit_test(verdicts_and_dead_reasons),
        cmocka_unit_test(tiers_parse_and_refuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
