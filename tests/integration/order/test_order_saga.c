/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The order service's half of the stock reservation saga on a real broker
 * (deploy/local/kafka.sh through relay_it) and real Postgres, with the real
 * catalog and order binaries (order_it): orders are created through
 * CreateOrder, and the test plays catalog's part, producing StockReserved /
 * StockRejected to shopmicro.inventory.v1 with CloudEvents headers. The
 * order service's consumer moves the orders; GetOrder, the outbox and
 * processed_events show what it did. Then: a duplicate ce_id and a late
 * StockRejected after CONFIRMED change nothing, poison lands on
 * shopmicro.inventory.v1.dlq with its reason and the consumer goes on.
 *
 * One broker and one order service serve the group; the tests run in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kafka/kafka.h"
#include "kfk_it.h"
#include "order_it.h"
#include "relay_it.h"
#include "shopmicro/events/v1/events.pb-c.h"

#define INVENTORY     "shopmicro.inventory.v1"
#define INVENTORY_DLQ "shopmicro.inventory.v1.dlq"
#define RESERVED      "shopmicro.inventory.v1.StockReserved"
#define REJECTED      "shopmicro.inventory.v1.StockRejected"
#define MOVE_MS       20000 /* the group's first join included; unscaled */

typedef struct saga_it {
    kit_fixture_t kafka; /* the broker (relay_it's), as kfk_it's helpers want it */
    ord_it_t *t;
    kfk_producer_t *p; /* plays catalog */
    int in_flight;
    svc_err_t last_err;
    char mug[37], tea[37]; /* products */
    char a[37], b[37];     /* orders: A gets StockReserved, B StockRejected */
    char key_a[64];        /* A's idempotency key */
    char ce_a[37];         /* the ce_id of A's StockReserved */
} saga_it_t;

static void on_delivery(void *ctx, void *opaque, svc_err_t err, const char *reason)
{
    saga_it_t *f = ctx;

    (void)opaque;
    if (err != SVC_OK) {
        fprintf(stderr, "delivery failed: %s\n", reason);
        f->last_err = err;
    }
    f->in_flight--;
}

/* One record as catalog writes it (key = order id), acknowledged. */
static void produce(saga_it_t *f, const char *ce_id, const char *type, const char *key,
                    const void *value, size_t len)
{
    const kfk_ce_t ce = {ce_id, type,         "/shopmicro/catalog", "2026-12-03T12:00:00.000000Z",
                         NULL,  "req-saga-it"};
    kfk_header_t h[KFK_CE_MAX_HEADERS];
    char errbuf[SVC_ERRBUF_LEN] = "";
    size_t nh = 0;

    assert_int_equal(kfk_ce_headers(&ce, h, &nh, errbuf), SVC_OK);
    kfk_message_t m = {INVENTORY, key, strlen(key), value, len, h, nh, NULL};
    f->last_err = SVC_OK;
    f->in_flight++;
    if (kfk_produce(f->p, &m, errbuf) != SVC_OK)
        fail_msg("produce: %s", errbuf);
    for (uint64_t give_up = svc_now_ms() + (uint64_t)it_ms(20000);
         f->in_flight > 0 && svc_now_ms() < give_up;)
        kfk_producer_poll(f->p, 50);
    assert_int_equal(f->in_flight, 0);
    assert_int_equal(f->last_err, SVC_OK);
}

static void produce_msg(saga_it_t *f, const char *ce_id, const char *type, const char *key,
                        const ProtobufCMessage *msg)
{
    uint8_t buf[4096];
    size_t n = protobuf_c_message_pack(msg, buf);

    produce(f, ce_id, type, key, buf, n);
}

static void produce_reserved(saga_it_t *f, const char *ce_id, const char *type,
                             const char *order_id)
{
    Shopmicro__Events__V1__StockReserved m = SHOPMICRO__EVENTS__V1__STOCK_RESERVED__INIT;

    m.order_id = (char *)order_id;
    m.reserved_at = (char *)"2026-12-03T12:00:00.000000Z";
    produce_msg(f, ce_id, type, order_id, &m.base);
}

/* StockRejected for order_id: mug wanted 3, available 1; `unknown` not in
 * the catalog. */
static void produce_rejected(saga_it_t *f, const char *ce_id, const char *order_id,
                             const char *unknown)
{
    Shopmicro__Events__V1__StockRejected m = SHOPMICRO__EVENTS__V1__STOCK_REJECTED__INIT;
    Shopmicro__Events__V1__StockShortage s[2], *ps[2] = {&s[0], &s[1]};

    shopmicro__events__v1__stock_shortage__init(&s[0]);
    shopmicro__events__v1__stock_shortage__init(&s[1]);
    s[0].product_id = f->mug;
    s[0].wanted = 3;
    s[0].available = 1;
    s[1].product_id = (char *)unknown;
    s[1].wanted = 1;
    s[1].unknown_product = true;
    m.order_id = (char *)order_id;
    m.shortages = ps;
    m.n_shortages = 2;
    m.rejected_at = (char *)"2026-12-03T12:00:00.000000Z";
    produce_msg(f, ce_id, REJECTED, order_id, &m.base);
}

/* GetOrder until the order has status `want`; fails after MOVE_MS. */
static it_order_t *wait_status(saga_it_t *f, const char *id, int want)
{
    uint64_t t0 = svc_now_ns(), give_up = svc_now_ms() + (uint64_t)it_ms(MOVE_MS);
    it_order_t *o = NULL;
    rpc_result_t res;

    for (;;) {
        it_order_get(f->t->ord_ch, id, 0, &o, &res);
        IT_ASSERT_CODE(res, SVC_OK);
        if ((int)o->status == want) {
            fprintf(stderr, "[saga] order %.8s… moved in %.0f ms\n", id, ord_it_ms_since(t0));
            return o;
        }
        if (svc_now_ms() > give_up)
            fail_msg("order %s still has status %d after %d ms, want %d", id, (int)o->status,
                     it_ms(MOVE_MS), want);
        it_free(o);
        ord_it_sleep_ms(50);
    }
}

/* One count from the orders database; the SQL is formatted. */
static int64_t count(saga_it_t *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int64_t count(saga_it_t *f, const char *fmt, ...)
{
    char sql[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return ord_it_int(f->t, sql);
}

static void create(saga_it_t *f, const char *customer, const char *key, it_created_t **c)
{
    it_item_t items[2] = {{f->mug, 3}, {f->tea, 1}};
    rpc_result_t res;

    it_order_create(f->t->ord_ch, customer, items, 2, key, 0, c, &res);
    IT_ASSERT_CODE(res, SVC_OK);
}

static int group_setup(void **state)
{
    saga_it_t *f = calloc(1, sizeof *f);
    char brokers[64], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[] = {brokers, "ORDER_LOG_LEVEL=debug", NULL};
    kfk_producer_opts_t po;
    void *t = NULL;

    *state = f;
    if (f == NULL)
        return -1;
    rly_it_kafka_cleanup(&f->kafka.kafka); /* a run folder left by a killed run */
    if (rly_it_kafka(&f->kafka.kafka, "start") != SVC_OK)
        return -1;
    snprintf(brokers, sizeof brokers, "ORDER_KAFKA_BROKERS=%s", f->kafka.kafka.brokers);
    if (ord_it_setup(&t, NULL, env) != 0)
        return -1;
    f->t = t;
    kfk_producer_opts_init(&po);
    po.brokers = f->kafka.kafka.brokers;
    po.on_delivery = on_delivery;
    po.ctx = f;
    if (kfk_producer_new(&po, &f->p, errbuf) != SVC_OK) {
        fprintf(stderr, "producer: %s\n", errbuf);
        return -1;
    }
    ord_it_product(f->t, "Mug", 1299, f->mug);
    ord_it_product(f->t, "Tea", 250, f->tea);
    return 0;
}

static int group_teardown(void **state)
{
    saga_it_t *f = *state;
    void *t;
    int rc = 0;

    if (f == NULL)
        return 0;
    kfk_producer_free(f->p, 1000);
    t = f->t;
    if (t != NULL && ord_it_teardown(&t) != 0)
        rc = -1; /* the order service must exit 0: its consumer stops cleanly */
    rly_it_kafka_cleanup(&f->kafka.kafka);
    free(f);
    return rc;
}

/* ------------------------------------------------------------------ */

/* The outbox row of an order's saga event: exactly one, on the orders
 * topic, with the contract's headers and both payloads. */
static void assert_outbox_row(saga_it_t *f, const char *order_id, const char *event,
                              const char *type)
{
    char sql[768], got[256], want[256];

    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM outbox WHERE aggregate_id = '%s' AND event_type = '%s'",
             order_id, event);
    assert_int_equal(ord_it_int(f->t, sql), 1);
    snprintf(sql, sizeof sql,
             "SELECT concat_ws('|', aggregate_type, topic, ce_type, ce_source, request_id, "
             "payload->>'order_id', octet_length(payload_pb) > 0, "
             "id IN (SELECT id FROM outbox_pending)) "
             "FROM outbox WHERE aggregate_id = '%s' AND event_type = '%s'",
             order_id, event);
    ord_it_text(f->t, sql, got, sizeof got);
    snprintf(want, sizeof want, "order|shopmicro.orders.v1|%s|/shopmicro/order|req-saga-it|%s|t|t",
             type, order_id);
    assert_string_equal(got, want);
}

/* The protobuf value the relay will publish, read back from the row. */
static Shopmicro__Events__V1__OrderCancelled *cancelled_event(saga_it_t *f, const char *order_id)
{
    char sql[256], hex[8192];
    uint8_t pb[4096];
    size_t n;

    snprintf(sql, sizeof sql,
             "SELECT encode(payload_pb, 'hex') FROM outbox WHERE aggregate_id = '%s' AND "
             "event_type = 'OrderCancelled'",
             order_id);
    ord_it_text(f->t, sql, hex, sizeof hex);
    n = strlen(hex) / 2;
    assert_true(n <= sizeof pb);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        pb[i] = (uint8_t)v;
    }
    return shopmicro__events__v1__order_cancelled__unpack(NULL, n, pb);
}

static void reserved_confirms_and_rejected_cancels_with_the_reason(void **state)
{
    saga_it_t *f = *state;
    char ce_b[37], unknown[37], uuid[37], reason[512], sql[512];
    it_created_t *ca = NULL, *cb = NULL, *again = NULL;
    Shopmicro__Events__V1__OrderCancelled *ev;
    it_order_t *o;

    it_random_uuid(uuid);
    snprintf(f->key_a, sizeof f->key_a, "saga-it-%s", uuid);
    create(f, "cust-a", f->key_a, &ca);
    create(f, "cust-b", NULL, &cb);
    assert_int_equal(ca->status, ORD_IT_PENDING);
    snprintf(f->a, sizeof f->a, "%s", ca->id);
    snprintf(f->b, sizeof f->b, "%s", cb->id);

    it_random_uuid(f->ce_a);
    it_random_uuid(ce_b);
    it_random_uuid(unknown);
    produce_reserved(f, f->ce_a, RESERVED, f->a);
    produce_rejected(f, ce_b, f->b, unknown);

    o = wait_status(f, f->a, ORD_IT_CONFIRMED);
    assert_string_equal(o->cancel_reason, "");
    it_free(o);
    o = wait_status(f, f->b, ORD_IT_CANCELLED);
    snprintf(reason, sizeof reason,
             "insufficient stock: product %s wanted 3, available 1; unknown product %s", f->mug,
             unknown);
    assert_string_equal(o->cancel_reason, reason);
    it_free(o);

    /* One event each in the outbox, next to the OrderCreated. */
    assert_outbox_row(f, f->a, "OrderConfirmed", "shopmicro.order.v1.OrderConfirmed");
    assert_outbox_row(f, f->b, "OrderCancelled", "shopmicro.order.v1.OrderCancelled");
    assert_int_equal(count(f, "SELECT count(*) FROM outbox WHERE aggregate_id = '%s'", f->a), 2);
    assert_int_equal(count(f,
                           "SELECT count(*) FROM outbox WHERE aggregate_id = '%s' AND "
                           "octet_length(payload_pb) > 0",
                           f->a),
                     2);
    assert_int_equal(count(f, "SELECT count(*) FROM outbox WHERE aggregate_id = '%s'", f->b), 2);
    snprintf(sql, sizeof sql,
             "SELECT concat_ws('|', payload->>'reason', jsonb_array_length(payload->'shortages'), "
             "payload->'shortages'->0->>'product_id', payload->'shortages'->0->>'wanted', "
             "payload->'shortages'->0->>'available', payload->'shortages'->1->>'unknown_product', "
             "payload->>'cancelled_at' = to_char(created_at AT TIME ZONE 'UTC', "
             "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')) "
             "FROM outbox WHERE aggregate_id = '%s' AND event_type = 'OrderCancelled'",
             f->b);
    {
        char got[768], want[768];
        ord_it_text(f->t, sql, got, sizeof got);
        snprintf(want, sizeof want, "%s|2|%s|3|1|true|t", reason, f->mug);
        assert_string_equal(got, want);
    }
    ev = cancelled_event(f, f->b);
    assert_non_null(ev);
    assert_string_equal(ev->order_id, f->b);
    assert_string_equal(ev->reason, reason);
    assert_int_equal(ev->n_shortages, 2);
    assert_string_equal(ev->shortages[1]->product_id, unknown);
    assert_true(ev->shortages[1]->unknown_product);
    shopmicro__events__v1__order_cancelled__free_unpacked(ev, NULL);
    assert_int_equal(count(f,
                           "SELECT count(*) FROM processed_events WHERE event_id = '%s' AND "
                           "event_type = '" RESERVED "'",
                           f->ce_a),
                     1);
    assert_int_equal(count(f,
                           "SELECT count(*) FROM processed_events WHERE event_id = '%s' AND "
                           "event_type = '" REJECTED "'",
                           ce_b),
                     1);

    /* The idempotency replay answers the status as it is now. */
    create(f, "cust-a", f->key_a, &again);
    assert_string_equal(again->id, f->a);
    assert_int_equal(again->status, ORD_IT_CONFIRMED);
    it_free(ca);
    it_free(cb);
    it_free(again);
}

static void a_duplicate_and_a_late_answer_change_nothing(void **state)
{
    saga_it_t *f = *state;
    char late[37], unknown[37], needle[256];
    ord_it_counts_t before = ord_it_counts(f->t);
    int64_t events = count(f, "SELECT count(*) FROM processed_events");
    it_order_t *o = NULL;
    rpc_result_t res;

    /* The relay published A's StockReserved again (same ce_id). */
    produce_reserved(f, f->ce_a, RESERVED, f->a);
    snprintf(needle, sizeof needle, "event %s (" RESERVED ") was handled before", f->ce_a);
    assert_int_equal(spawn_log_wait(f->t->ord, needle, it_ms(MOVE_MS)), SVC_OK);

    /* A StockRejected for A, now CONFIRMED: never back. */
    it_random_uuid(late);
    it_random_uuid(unknown);
    produce_rejected(f, late, f->a, unknown);
    snprintf(needle, sizeof needle, "is CONFIRMED, not PENDING: event %s", late);
    assert_int_equal(spawn_log_wait(f->t->ord, needle, it_ms(MOVE_MS)), SVC_OK);

    it_order_get(f->t->ord_ch, f->a, 0, &o, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(o->status, ORD_IT_CONFIRMED);
    assert_string_equal(o->cancel_reason, "");
    it_free(o);
    ord_it_assert_counts(ord_it_counts(f->t), before); /* no outbox row */
    assert_int_equal(count(f,
                           "SELECT count(*) FROM outbox WHERE aggregate_id = '%s' AND "
                           "event_type = 'OrderCancelled'",
                           f->a),
                     0);
    /* The late answer's id is recorded (a redelivery of it is a duplicate);
     * the duplicate added nothing. */
    assert_int_equal(count(f, "SELECT count(*) FROM processed_events WHERE event_id = '%s'", late),
                     1);
    assert_int_equal(count(f, "SELECT count(*) FROM processed_events"), events + 1);
}

static void poison_is_dead_lettered_and_the_consumer_goes_on(void **state)
{
    static const char garbage[] = "not a protobuf";
    saga_it_t *f = *state;
    char ce_garbage[37], ce_newer[37], ce_ghost[37], ce_d[37], ghost[37], needle[256];
    ord_it_counts_t before;
    it_created_t *cd = NULL;
    kit_dead_t dead;
    it_order_t *o;

    create(f, "cust-d", NULL, &cd);
    before = ord_it_counts(f->t);
    it_random_uuid(ce_garbage);
    it_random_uuid(ce_newer);
    it_random_uuid(ce_ghost);
    it_random_uuid(ce_d);
    it_random_uuid(ghost);
    /* Keyed by D: one partition, in this order, so D's own StockReserved
     * comes behind both poison records. */
    produce(f, ce_garbage, RESERVED, cd->id, garbage, sizeof garbage - 1);
    produce_reserved(f, ce_newer, "shopmicro.inventory.v2.StockReserved", cd->id);
    produce_reserved(f, ce_ghost, RESERVED, ghost); /* an order nobody has */
    produce_reserved(f, ce_d, RESERVED, cd->id);

    o = wait_status(f, cd->id, ORD_IT_CONFIRMED); /* the consumer went on */
    it_free(o);
    snprintf(needle, sizeof needle, "no order %s in this database", ghost);
    assert_int_equal(spawn_log_wait(f->t->ord, needle, it_ms(MOVE_MS)), SVC_OK);

    /* Three dead letters; the first (garbage) with its reason and origin. A
     * dead letter is committed after its copy is acknowledged, so the last
     * may still be on its way: read until all three are there. */
    for (uint64_t give_up = svc_now_ms() + (uint64_t)it_ms(15000);;) {
        kit_read_dead_letters(&f->kafka, INVENTORY_DLQ, &dead);
        if (dead.n >= 3 || svc_now_ms() > give_up)
            break;
        ord_it_sleep_ms(200);
    }
    assert_int_equal(dead.n, 3);
    assert_string_equal(dead.ce_id, ce_garbage);
    assert_string_equal(dead.key, cd->id);
    assert_string_equal(dead.value, garbage);
    assert_string_equal(dead.reason, "undecodable StockReserved payload (14 bytes)");
    assert_string_equal(dead.topic, INVENTORY);
    assert_string_equal(dead.group, "order");
    assert_true(spawn_log_contains(f->t->ord, "is a newer schema than this consumer reads"));

    /* Poison wrote nothing: D's confirmation is the only new row. */
    before.outbox += 1;
    ord_it_assert_counts(ord_it_counts(f->t), before);
    {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM processed_events WHERE event_id IN ('%s', '%s', '%s')",
                 ce_garbage, ce_newer, ce_ghost);
        assert_int_equal(ord_it_int(f->t, sql), 0);
    }
    it_free(cd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reserved_confirms_and_rejected_cancels_with_the_reason),
        cmocka_unit_test(a_duplicate_and_a_late_answer_change_nothing),
        cmocka_unit_test(poison_is_dead_lettered_and_the_consumer_goes_on),
    };
    int rc;

    setvbuf(stderr, NULL, _IOLBF, 0);
    cat_it_global_init();
    rc = svc_test_run_group("order_saga", tests, SVC_COUNTOF(tests), group_setup, group_teardown);
    cat_it_global_fini();
    return rc;
}
