/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_kafka.c - pkg/kafka without a broker: the CloudEvents headers, the
 * producer's option validation, the error mapping, and what kfk_produce
 * refuses before anything is queued (a producer pointed at a closed port:
 * creating one never connects).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "kafka/kafka.h"

static void header_is(const kfk_header_t *h, const char *name, const char *value)
{
    assert_string_equal(h->name, name);
    assert_int_equal(h->len, strlen(value));
    assert_memory_equal(h->value, value, h->len);
}

static void ce_headers_full_set_in_order(void **state)
{
    const kfk_ce_t ce = {"id-1",
                         "shopmicro.order.v1.OrderCreated",
                         "/shopmicro/order",
                         "2026-12-03T08:00:00.000001Z",
                         NULL,
                         "req-7"};
    kfk_header_t h[KFK_CE_MAX_HEADERS];
    size_t n = 0;

    assert_int_equal(kfk_ce_headers(&ce, h, &n, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(n, 7);
    header_is(&h[0], "ce_specversion", "1.0");
    header_is(&h[1], "ce_id", "id-1");
    header_is(&h[2], "ce_type", "shopmicro.order.v1.OrderCreated");
    header_is(&h[3], "ce_source", "/shopmicro/order");
    header_is(&h[4], "ce_time", "2026-12-03T08:00:00.000001Z");
    header_is(&h[5], "content-type", "application/protobuf");
    header_is(&h[6], "x-request-id", "req-7");
}

static void ce_headers_optional_ones_omitted(void **state)
{
    const kfk_ce_t ce = {"id-1", "t", "/s", "", "application/json", NULL};
    kfk_header_t h[KFK_CE_MAX_HEADERS];
    size_t n = 0;

    assert_int_equal(kfk_ce_headers(&ce, h, &n, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(n, 5);
    header_is(&h[3], "ce_source", "/s");
    header_is(&h[4], "content-type", "application/json");
}

static void ce_headers_required_attributes(void **state)
{
    const kfk_ce_t cases[] = {{NULL, "t", "/s", NULL, NULL, NULL},
                              {"i", "", "/s", NULL, NULL, NULL},
                              {"i", "t", NULL, NULL, NULL, NULL}};
    const char *names[] = {"ce_id", "ce_type", "ce_source"};
    char errbuf[SVC_ERRBUF_LEN];
    kfk_header_t h[KFK_CE_MAX_HEADERS];
    size_t n = 9;

    for (size_t i = 0; i < 3; i++) {
        errbuf[0] = '\0';
        assert_int_equal(kfk_ce_headers(&cases[i], h, &n, errbuf), SVC_EINVAL);
        assert_int_equal(n, 0);
        assert_non_null(strstr(errbuf, names[i]));
    }
}

static void noop_delivery(void *ctx, void *opaque, svc_err_t err, const char *reason)
{
}

static void valid_opts(kfk_producer_opts_t *o)
{
    kfk_producer_opts_init(o);
    o->brokers = "127.0.0.1:1";
    o->on_delivery = noop_delivery;
}

static void opts_defaults(void **state)
{
    kfk_producer_opts_t o;

    kfk_producer_opts_init(&o);
    assert_string_equal(o.acks, "all");
    assert_true(o.idempotence);
    assert_int_equal(o.linger_ms, KFK_DEFAULT_LINGER_MS);
    assert_int_equal(o.delivery_timeout_ms, KFK_DEFAULT_DELIVERY_TIMEOUT_MS);
    assert_int_equal(o.queue_max_msgs, KFK_DEFAULT_QUEUE_MAX_MSGS);
    assert_null(o.brokers);
    valid_opts(&o);
    assert_int_equal(kfk_producer_opts_validate(&o, SVC_ERRBUF_SCRATCH), SVC_OK);
}

static void expect_invalid(const kfk_producer_opts_t *o, const char *word)
{
    char errbuf[SVC_ERRBUF_LEN] = "";

    assert_int_equal(kfk_producer_opts_validate(o, errbuf), SVC_EINVAL);
    if (strstr(errbuf, word) == NULL)
        fail_msg("'%s' does not name %s", errbuf, word);
}

static void opts_validation(void **state)
{
    kfk_producer_opts_t o;

    valid_opts(&o), o.brokers = "";
    expect_invalid(&o, "brokers");
    valid_opts(&o), o.acks = "2";
    expect_invalid(&o, "acks");
    valid_opts(&o), o.acks = "1";
    expect_invalid(&o, "idempotence needs acks=all");
    o.idempotence = false;
    assert_int_equal(kfk_producer_opts_validate(&o, SVC_ERRBUF_SCRATCH), SVC_OK);
    valid_opts(&o), o.linger_ms = -1;
    expect_invalid(&o, "linger_ms");
    valid_opts(&o), o.delivery_timeout_ms = 999;
    expect_invalid(&o, "delivery_timeout_ms");
    valid_opts(&o), o.queue_max_msgs = 0;
    expect_invalid(&o, "queue_max_msgs");
    valid_opts(&o), o.on_delivery = NULL;
    expect_invalid(&o, "on_delivery");
}

static void error_mapping(void **state)
{
    assert_int_equal(kfk_err_from_rd(RD_KAFKA_RESP_ERR_NO_ERROR), SVC_OK);
    assert_int_equal(kfk_err_from_rd(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT), SVC_EUNAVAIL);
    assert_int_equal(kfk_err_from_rd(RD_KAFKA_RESP_ERR__TRANSPORT), SVC_EUNAVAIL);
    assert_int_equal(kfk_err_from_rd(RD_KAFKA_RESP_ERR__PURGE_QUEUE), SVC_EUNAVAIL);
    assert_int_equal(kfk_err_from_rd(RD_KAFKA_RESP_ERR__QUEUE_FULL), SVC_EEXHAUSTED);
    assert_int_equal(kfk_err_from_rd(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART), SVC_ENOTFOUND);
    assert_int_equal(kfk_err_from_rd(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE), SVC_EINVAL);
    assert_int_equal(kfk_err_from_rd(RD_KAFKA_RESP_ERR_INVALID_RECORD), SVC_EINVAL);
    assert_int_equal(kfk_err_from_rd(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED), SVC_EINTERNAL);
}

typedef struct reports {
    int n;
    svc_err_t last;
    void *opaque;
} reports_t;

static void count_delivery(void *ctx, void *opaque, svc_err_t err, const char *reason)
{
    reports_t *r = ctx;

    r->n++;
    r->last = err;
    r->opaque = opaque;
}

/* A refused message never gets a report; an accepted one gets exactly one,
 * even when it never reached a broker (purged when the producer is freed). */
static void produce_refusals_and_purge(void **state)
{
    reports_t rep = {0, SVC_OK, NULL};
    kfk_producer_opts_t o;
    kfk_producer_t *p = NULL;
    kfk_header_t bad[] = {{"", "v", 1}};
    kfk_header_t good[] = {{"ce_id", "x", 1}};
    kfk_message_t m = {.topic = "t", .value = "v", .value_len = 1};
    char errbuf[SVC_ERRBUF_LEN] = "";
    int tag;

    valid_opts(&o);
    o.on_delivery = count_delivery;
    o.ctx = &rep;
    assert_int_equal(kfk_producer_new(&o, &p, errbuf), SVC_OK);
    m.headers = bad, m.n_headers = 1;
    assert_int_equal(kfk_produce(p, &m, errbuf), SVC_EINVAL);
    m.headers = good, m.n_headers = KFK_MAX_HEADERS + 1;
    assert_int_equal(kfk_produce(p, &m, errbuf), SVC_EINVAL);
    m.topic = "";
    m.n_headers = 1;
    assert_int_equal(kfk_produce(p, &m, errbuf), SVC_EINVAL);
    assert_int_equal(kfk_producer_outstanding(p), 0);
    m.topic = "t";
    m.opaque = &tag;
    assert_int_equal(kfk_produce(p, &m, errbuf), SVC_OK);
    assert_int_equal(kfk_producer_outstanding(p), 1);
    kfk_producer_free(p, 0);
    assert_int_equal(rep.n, 1);
    assert_int_equal(rep.last, SVC_EUNAVAIL);
    assert_ptr_equal(rep.opaque, &tag);
}

typedef struct yielding {
    kfk_producer_t *p;
    bool yield; /* kfk_producer_yield in each report */
    int n;
} yielding_t;

static void yield_delivery(void *ctx, void *opaque, svc_err_t err, const char *reason)
{
    yielding_t *y = ctx;

    y->n++;
    if (y->yield)
        kfk_producer_yield(y->p);
}

/* A report that yields ends the flush serving it, whatever is outstanding
 * (the relay's wait for one batch while the next is in flight); the reports
 * left are served by the next call. Without the yield, the first flush would
 * serve all three (they time out together, no broker being there). */
static void yield_ends_the_flush_at_that_report(void **state)
{
    yielding_t y = {NULL, true, 0};
    kfk_producer_opts_t o;
    kfk_message_t m = {.topic = "t", .value = "v", .value_len = 1};
    char errbuf[SVC_ERRBUF_LEN] = "";

    valid_opts(&o);
    o.on_delivery = yield_delivery;
    o.ctx = &y;
    o.delivery_timeout_ms = 1000; /* the least: each message fails after 1 s */
    assert_int_equal(kfk_producer_new(&o, &y.p, errbuf), SVC_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(kfk_produce(y.p, &m, errbuf), SVC_OK);
    assert_int_equal(kfk_producer_flush(y.p, 10000), 2);
    assert_int_equal(y.n, 1);
    y.yield = false;
    assert_int_equal(kfk_producer_flush(y.p, 10000), 0);
    assert_int_equal(y.n, 3);
    kfk_producer_free(y.p, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ce_headers_full_set_in_order),
        cmocka_unit_test(ce_headers_optional_ones_omitted),
        cmocka_unit_test(ce_headers_required_attributes),
        cmocka_unit_test(opts_defaults),
        cmocka_unit_test(opts_validation),
        cmocka_unit_test(error_mapping),
        cmocka_unit_test(produce_refusals_and_purge),
        cmocka_unit_test(yield_ends_the_flush_at_that_report),
    };
    return cmocka_run_group_tests_name("kfk", tests, NULL, NULL);
}
