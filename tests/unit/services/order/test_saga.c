/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The saga handler's pure parts (services/order/saga.c) without a broker or
 * a database: which ce_type is read and which is poison (and why), what a
 * record decodes to, the cancel reason built from the shortages, and the
 * verdict for each database error, and the Order's JSON (the gateway's
 * GET /v1/orders/{id}) with its cancelReason. Poison records go through
 * ord_saga_handle itself with no store: it must refuse them before any
 * database work.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pbj/pbjson.h"
#include "saga.h"

#define ORDER_ID "0b7c3f9e-2d4a-4c1e-9f3b-6a8d5e7c1b20"
#define EVENT_ID "5f0e6a1c-8b2d-4e3f-a1c9-7d6b5a4e3f21"

/* A record under construction: headers, key, value. */
typedef struct rec {
    kfk_header_t h[8];
    uint8_t value[4096];
    kfk_record_t r;
} rec_t;

static void header(rec_t *x, const char *name, const char *value)
{
    x->h[x->r.n_headers++] = (kfk_header_t){name, value, strlen(value)};
}

/* A record of ce_type `type` (NULL: no header) with msg (NULL: no value). */
static void make(rec_t *x, const char *type, const ProtobufCMessage *msg)
{
    memset(x, 0, sizeof *x);
    x->r.topic = ORD_SAGA_TOPIC;
    x->r.headers = x->h;
    x->r.ce_id = EVENT_ID;
    x->r.key = ORDER_ID;
    x->r.key_len = strlen(ORDER_ID);
    x->r.deadline_ms = UINT64_MAX;
    header(x, "ce_specversion", "1.0");
    header(x, "ce_id", EVENT_ID);
    if (type != NULL)
        header(x, "ce_type", type);
    header(x, "ce_source", "/shopmicro/catalog");
    if (msg != NULL) {
        x->r.value_len = protobuf_c_message_pack(msg, x->value);
        x->r.value = x->value;
    }
}

static void make_reserved(rec_t *x, const char *type, const char *order_id)
{
    Shopmicro__Events__V1__StockReserved m = SHOPMICRO__EVENTS__V1__STOCK_RESERVED__INIT;

    m.order_id = (char *)order_id;
    m.reserved_at = (char *)"2026-12-03T12:00:00.000000Z";
    make(x, type, &m.base);
}

/* Decodes and expects poison whose reason contains `want`. */
static void expect_poison(const kfk_record_t *r, const char *want)
{
    char reason[KFK_REASON_LEN] = "";
    ord_saga_decoded_t d;
    ord_saga_t s = {NULL}; /* no store: poison must be decided first */

    assert_int_equal(ord_saga_decode(r, &d, reason), KFK_POISON);
    if (strstr(reason, want) == NULL)
        fail_msg("reason \"%s\" does not say \"%s\"", reason, want);
    assert_null(d.msg);
    reason[0] = '\0';
    assert_int_equal(ord_saga_handle(&s, r, reason), KFK_POISON);
    assert_non_null(strstr(reason, want));
}

static void reserved_decodes_to_a_confirm(void **state)
{
    char reason[KFK_REASON_LEN] = "";
    ord_saga_decoded_t d;
    rec_t x;

    (void)state;
    make_reserved(&x, ORD_SAGA_RESERVED_TYPE, ORDER_ID);
    header(&x, "x-request-id", "req-saga-1");
    assert_int_equal(ord_saga_decode(&x.r, &d, reason), KFK_HANDLED);
    assert_true(d.ev.confirm);
    assert_string_equal(d.ev.order_id, ORDER_ID);
    assert_string_equal(d.ev.event_id, EVENT_ID);
    assert_string_equal(d.ev.event_type, ORD_SAGA_RESERVED_TYPE);
    assert_string_equal(d.ev.request_id, "req-saga-1");
    assert_int_equal(d.ev.n_shortages, 0);
    ord_saga_decoded_free(&d);

    /* No key and no x-request-id are fine: the order id is in the value. */
    make_reserved(&x, ORD_SAGA_RESERVED_TYPE, ORDER_ID);
    x.r.key = NULL;
    x.r.key_len = 0;
    assert_int_equal(ord_saga_decode(&x.r, &d, reason), KFK_HANDLED);
    assert_string_equal(d.ev.request_id, "");
    ord_saga_decoded_free(&d);
}

static void rejected_decodes_to_a_cancel_with_its_reason_and_shortages(void **state)
{
    Shopmicro__Events__V1__StockRejected m = SHOPMICRO__EVENTS__V1__STOCK_REJECTED__INIT;
    Shopmicro__Events__V1__StockShortage s[2], *ps[2] = {&s[0], &s[1]};
    char reason[KFK_REASON_LEN] = "";
    ord_saga_decoded_t d;
    rec_t x;

    (void)state;
    shopmicro__events__v1__stock_shortage__init(&s[0]);
    shopmicro__events__v1__stock_shortage__init(&s[1]);
    s[0].product_id = (char *)"p-1";
    s[0].wanted = 3;
    s[0].available = 1;
    s[1].product_id = (char *)"p-2";
    s[1].wanted = 1;
    s[1].unknown_product = true;
    m.order_id = (char *)ORDER_ID;
    m.shortages = ps;
    m.n_shortages = 2;
    make(&x, ORD_SAGA_REJECTED_TYPE, &m.base);
    assert_int_equal(ord_saga_decode(&x.r, &d, reason), KFK_HANDLED);
    assert_false(d.ev.confirm);
    assert_string_equal(d.ev.order_id, ORDER_ID);
    assert_string_equal(d.ev.reason, "insufficient stock: product p-1 wanted 3, available 1; "
                                     "unknown product p-2");
    assert_int_equal(d.ev.n_shortages, 2);
    assert_string_equal(d.ev.shortages[1]->product_id, "p-2");
    assert_true(d.ev.shortages[1]->unknown_product);
    ord_saga_decoded_free(&d);

    /* 101 shortages: more than an order has lines. */
    {
        Shopmicro__Events__V1__StockShortage many[ORD_MAX_ITEMS + 1];
        Shopmicro__Events__V1__StockShortage *pm[ORD_MAX_ITEMS + 1];
        for (size_t i = 0; i <= ORD_MAX_ITEMS; i++) {
            shopmicro__events__v1__stock_shortage__init(&many[i]);
            many[i].product_id = (char *)"p";
            pm[i] = &many[i];
        }
        m.shortages = pm;
        m.n_shortages = ORD_MAX_ITEMS + 1;
        make(&x, ORD_SAGA_REJECTED_TYPE, &m.base);
        expect_poison(&x.r, "101 shortages");
    }
    /* A product id that is not UTF-8, or empty. */
    s[1].product_id = (char *)"\xff\xfe";
    m.shortages = ps;
    m.n_shortages = 2;
    make(&x, ORD_SAGA_REJECTED_TYPE, &m.base);
    expect_poison(&x.r, "shortages[1].product_id must be 1-100 characters of UTF-8");
    s[1].product_id = (char *)"";
    make(&x, ORD_SAGA_REJECTED_TYPE, &m.base);
    expect_poison(&x.r, "shortages[1].product_id");
}

static void unknown_and_newer_types_are_poison(void **state)
{
    rec_t x;

    (void)state;
    make_reserved(&x, NULL, ORDER_ID);
    expect_poison(&x.r, "no ce_type header");
    make_reserved(&x, "shopmicro.inventory.v2.StockReserved", ORDER_ID);
    expect_poison(&x.r, "ce_type shopmicro.inventory.v2.StockReserved is a newer schema");
    make_reserved(&x, "shopmicro.inventory.v1.StockCounted", ORDER_ID);
    expect_poison(&x.r, "unknown ce_type shopmicro.inventory.v1.StockCounted");
    make_reserved(&x, "shopmicro.order.v1.OrderCreated", ORDER_ID); /* not ours to read */
    expect_poison(&x.r, "unknown ce_type shopmicro.order.v1.OrderCreated");
    make_reserved(&x, "StockReserved", ORDER_ID);
    expect_poison(&x.r, "unknown ce_type StockReserved");
    /* v0 is older, not newer: unknown */
    make_reserved(&x, "shopmicro.inventory.v0.StockReserved", ORDER_ID);
    expect_poison(&x.r, "unknown ce_type");
}

static void bad_ids_and_payloads_are_poison(void **state)
{
    static const uint8_t garbage[] = "not a protobuf";
    char long_id[400];
    rec_t x;

    (void)state;
    make_reserved(&x, ORD_SAGA_RESERVED_TYPE, ORDER_ID);
    x.r.ce_id = NULL;
    expect_poison(&x.r, "no ce_id header");
    memset(long_id, 'a', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    x.r.ce_id = long_id;
    expect_poison(&x.r, "ce_id must be at most 255 bytes");

    make_reserved(&x, ORD_SAGA_RESERVED_TYPE, ORDER_ID);
    x.r.value = garbage;
    x.r.value_len = sizeof garbage - 1;
    expect_poison(&x.r, "undecodable StockReserved payload (14 bytes)");
    make_reserved(&x, ORD_SAGA_REJECTED_TYPE, ORDER_ID);
    x.r.value = garbage;
    x.r.value_len = sizeof garbage - 1;
    expect_poison(&x.r, "undecodable StockRejected payload");

    make_reserved(&x, ORD_SAGA_RESERVED_TYPE, "order-1");
    x.r.key = NULL;
    expect_poison(&x.r, "order_id \"order-1\" is not a UUID");
    make(&x, ORD_SAGA_RESERVED_TYPE, NULL); /* an empty value: every field empty */
    expect_poison(&x.r, "order_id \"\" is not a UUID");
    make_reserved(&x, ORD_SAGA_RESERVED_TYPE, ORDER_ID);
    x.r.key = "11111111-2222-3333-4444-555555555555";
    expect_poison(&x.r, "the record's key is not its order_id");
}

static void cancel_reason_keeps_whole_clauses(void **state)
{
    Shopmicro__Events__V1__StockShortage s[ORD_MAX_ITEMS], *ps[ORD_MAX_ITEMS];
    char out[ORD_SAGA_REASON_MAX], id[ORD_MAX_ITEMS][40];
    size_t len;

    (void)state;
    assert_int_equal(ord_saga_cancel_reason(NULL, 0, out, sizeof out),
                     strlen("stock reservation rejected"));
    assert_string_equal(out, "stock reservation rejected");
    for (size_t i = 0; i < ORD_MAX_ITEMS; i++) {
        shopmicro__events__v1__stock_shortage__init(&s[i]);
        snprintf(id[i], sizeof id[i], "%08zu-0000-4000-8000-000000000000", i);
        s[i].product_id = id[i];
        s[i].wanted = 1000;
        s[i].available = (int32_t)i;
        ps[i] = &s[i];
    }
    ord_saga_cancel_reason(ps, 1, out, sizeof out);
    assert_string_equal(out, "insufficient stock: product 00000000-0000-4000-8000-000000000000 "
                             "wanted 1000, available 0");

    /* 100 clauses of ~90 bytes: the first that fit, then how many more. */
    len = ord_saga_cancel_reason(ps, ORD_MAX_ITEMS, out, sizeof out);
    assert_int_equal(len, strlen(out));
    assert_true(len < sizeof out);
    assert_non_null(strstr(out, "; and "));
    assert_non_null(strstr(out, " more"));
    {
        const char *more = strstr(out, "; and ") + strlen("; and ");
        size_t shown = 0;
        for (const char *p = out; (p = strstr(p, "insufficient stock")) != NULL; p++)
            shown++;
        assert_int_equal(shown + strtoul(more, NULL, 10), ORD_MAX_ITEMS);
        assert_true(shown >= 5);
    }

    /* A tiny buffer: no clause fits, only the count. */
    ord_saga_cancel_reason(ps, 3, out, 40);
    assert_string_equal(out, "and 3 more");
    /* Never past cap. */
    ord_saga_cancel_reason(ps, 3, out, 4);
    assert_int_equal(strlen(out), 3);
}

static void database_errors_are_retried_unless_a_value_was_refused(void **state)
{
    (void)state;
    assert_int_equal(ord_saga_db_verdict(SVC_EUNAVAIL, false), KFK_RETRY);
    assert_int_equal(ord_saga_db_verdict(SVC_ETIMEDOUT, false), KFK_RETRY);
    assert_int_equal(ord_saga_db_verdict(SVC_EABORTED, false), KFK_RETRY);
    assert_int_equal(ord_saga_db_verdict(SVC_EINTERNAL, false), KFK_RETRY);
    assert_int_equal(ord_saga_db_verdict(SVC_ENOMEM, false), KFK_RETRY);
    assert_int_equal(ord_saga_db_verdict(SVC_EINVAL, false), KFK_POISON);
    /* in a batch: rolled back and handed again alone, where it is poison */
    assert_int_equal(ord_saga_db_verdict(SVC_EINVAL, true), KFK_RETRY);
    assert_int_equal(ord_saga_db_verdict(SVC_EUNAVAIL, true), KFK_RETRY);
}

/* GET /v1/orders/{id} through the gateway is pbjson's encoding of Order:
 * the status and the reason, named as grpc-gateway names them, with no
 * route or gateway code of their own. */
static void order_json_shows_the_status_and_cancel_reason(void **state)
{
    ord_order_t o = SHOPMICRO__ORDER__V1__ORDER__INIT;
    char *json = NULL;
    size_t len = 0;

    (void)state;
    o.id = (char *)ORDER_ID;
    o.status = SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_CANCELLED;
    o.cancel_reason = (char *)"unknown product p-2";
    assert_int_equal(pbj_encode(&o.base, NULL, &json, &len, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_non_null(strstr(json, "\"status\":\"ORDER_STATUS_CANCELLED\""));
    assert_non_null(strstr(json, "\"cancelReason\":\"unknown product p-2\""));
    pbj_free(NULL, json);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reserved_decodes_to_a_confirm),
        cmocka_unit_test(rejected_decodes_to_a_cancel_with_its_reason_and_shortages),
        cmocka_unit_test(unknown_and_newer_types_are_poison),
        cmocka_unit_test(bad_ids_and_payloads_are_poison),
        cmocka_unit_test(cancel_reason_keeps_whole_clauses),
        cmocka_unit_test(database_errors_are_retried_unless_a_value_was_refused),
        cmocka_unit_test(order_json_shows_the_status_and_cancel_reason),
    };
    return cmocka_run_group_tests_name("ord_saga", tests, NULL, NULL);
}
