/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_catalog_saga.c - the catalog's stock reservation (services/catalog
 * saga.c, stock.c, reserve.c) on a real Postgres: the real catalog binary
 * migrates a fresh database and creates the products over gRPC, and the
 * saga's handler is driven directly with records as the consumer would hand
 * them (no broker: test_saga_e2e runs the whole path on Kafka).
 *
 * Checked: all or nothing (a 10-line order with one short line moves no
 * stock), the outbox row's wire form (decoded back), dedupe by event id and
 * by order, every kind of poison writes nothing, a database that is down
 * asks for a retry, and 8 threads reserving the same 4 products at once
 * never drive stock below 0 while the stock taken is exactly what the
 * reserved orders asked for.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "catalog_it.h"
#include "saga.h"
#include "shopmicro/events/v1/events.pb-c.h"

typedef Shopmicro__Events__V1__OrderLine ev_line_t;

typedef struct fx {
    cat_it_t *cat;
    cat_saga_t *saga;
} fx_t;

static int setup(void **state)
{
    static fx_t f;
    char errbuf[SVC_ERRBUF_LEN];

    if (cat_it_setup((void **)&f.cat) != 0)
        return -1;
    if (cat_saga_new_detached(f.cat->db.dsn, 5000, &f.saga, errbuf) != SVC_OK) {
        fprintf(stderr, "saga: %s\n", errbuf);
        return -1;
    }
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;

    cat_saga_stop(f->saga);
    return cat_it_teardown((void **)&f->cat);
}

static void product(const fx_t *f, int32_t stock, char id[37])
{
    it_product_t *p = NULL;
    rpc_result_t res;

    assert_int_equal(it_create(f->cat->ch, "saga product", "", 100, stock, 0, &p, &res), SVC_OK);
    snprintf(id, 37, "%s", p->id);
    it_free(p);
}

static int64_t stock_of(const fx_t *f, const char *id)
{
    char sql[128], errbuf[SVC_ERRBUF_LEN];
    int64_t v = -1;

    snprintf(sql, sizeof sql, "SELECT stock FROM products WHERE id = '%s'", id);
    assert_int_equal(pgtest_scalar_int(f->cat->db.dsn, sql, &v, errbuf), SVC_OK);
    return v;
}

static int64_t count(const fx_t *f, const char *sql)
{
    char errbuf[SVC_ERRBUF_LEN];
    int64_t v = -1;

    assert_int_equal(pgtest_scalar_int(f->cat->db.dsn, sql, &v, errbuf), SVC_OK);
    return v;
}

/* An OrderCreated of order_id with n lines (ids[i], qty[i]), packed into
 * buf; returns its length. */
static size_t order_created(const char *order_id, const char *const *ids, const int32_t *qty,
                            size_t n, uint8_t *buf, size_t cap)
{
    Shopmicro__Events__V1__OrderCreated ev = SHOPMICRO__EVENTS__V1__ORDER_CREATED__INIT;
    ev_line_t lines[16], *lp[16];

    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++) {
        shopmicro__events__v1__order_line__init(&lines[i]);
        lines[i].product_id = (char *)ids[i];
        lines[i].quantity = qty[i];
        lines[i].unit_price_cents = 100;
        lp[i] = &lines[i];
    }
    ev.order_id = (char *)order_id;
    ev.customer_id = (char *)"c1";
    ev.n_items = n;
    ev.items = lp;
    ev.total_cents = 1;
    ev.created_at = (char *)"2026-12-03T00:00:00.000Z";
    assert_true(shopmicro__events__v1__order_created__get_packed_size(&ev) <= cap);
    return shopmicro__events__v1__order_created__pack(&ev, buf);
}

/* Hands one record to the handler, inside whatever transaction is open
 * (batched: as one record of a batch). */
static kfk_verdict_t hand_in_tx(cat_saga_t *s, const char *ce_id, const char *ce_type,
                                const void *value, size_t len, bool batched, char *reason)
{
    kfk_header_t h[3];
    size_t nh = 0;
    kfk_record_t r = {.topic = CAT_SAGA_TOPIC_IN,
                      .value = value,
                      .value_len = len,
                      .ce_id = ce_id,
                      .attempt = 1,
                      .batched = batched,
                      .deadline_ms = svc_now_ms() + (uint64_t)it_ms(10000)};

    if (ce_type != NULL)
        h[nh++] = (kfk_header_t){"ce_type", ce_type, strlen(ce_type)};
    if (ce_id != NULL)
        h[nh++] = (kfk_header_t){"ce_id", ce_id, strlen(ce_id)};
    h[nh++] = (kfk_header_t){"x-request-id", "saga-test", 9};
    r.headers = h;
    r.n_headers = nh;
    reason[0] = '\0';
    return cat_saga_handle(s, &r, reason);
}

/* Hands one record to the handler as the consumer does to a record alone:
 * in a transaction of its own, committed when the verdict says done. */
static kfk_verdict_t hand(cat_saga_t *s, const char *ce_id, const char *ce_type, const void *value,
                          size_t len, char *reason)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    uint64_t deadline_ms = svc_now_ms() + (uint64_t)it_ms(10000);
    kfk_verdict_t v;

    if (cat_saga_batch_ops.begin(s, deadline_ms, errbuf) != SVC_OK) {
        /* as the consumer does: a retry, with the reason */
        snprintf(reason, KFK_REASON_LEN, "transaction begin: %.200s", errbuf);
        return KFK_RETRY;
    }
    v = hand_in_tx(s, ce_id, ce_type, value, len, false, reason);
    if (v != KFK_HANDLED && v != KFK_DUPLICATE)
        cat_saga_batch_ops.rollback(s);
    else if (cat_saga_batch_ops.commit(s, deadline_ms, errbuf) != SVC_OK)
        fail_msg("commit: %s", errbuf);
    return v;
}

/* Fails with the handler's reason when the verdict is not the one wanted. */
#define assert_verdict(call, want, reason)                                                         \
    do {                                                                                           \
        kfk_verdict_t got_ = (call);                                                               \
        if (got_ != (want))                                                                        \
            fail_msg("verdict %d, wanted %d (%s): %s", (int)got_, (int)(want), #want, (reason));   \
    } while (0)

static kfk_verdict_t order(fx_t *f, const char *ce_id, const char *order_id, const char *const *ids,
                           const int32_t *qty, size_t n, char *reason)
{
    uint8_t buf[4096];
    size_t len = order_created(order_id, ids, qty, n, buf, sizeof buf);

    return hand(f->saga, ce_id, "shopmicro.order.v1.OrderCreated", buf, len, reason);
}

/* The last outbox row of order_id: its ce_type, and its protobuf unpacked
 * with `unpack` (NULL when it has none). */
static void *last_event(const fx_t *f, const char *order_id, char *ce_type, size_t cap,
                        void *(*unpack)(const uint8_t *, size_t))
{
    char sql[256], hex[8192], errbuf[SVC_ERRBUF_LEN];
    uint8_t bin[4096];
    size_t n = 0;

    snprintf(sql, sizeof sql,
             "SELECT ce_type || ' ' || encode(payload_pb, 'hex') FROM outbox "
             "WHERE aggregate_id = '%s' AND topic = 'shopmicro.inventory.v1' "
             "AND ce_source = '/shopmicro/catalog' AND request_id = 'saga-test' "
             "ORDER BY seq DESC LIMIT 1",
             order_id);
    if (pgtest_scalar(f->cat->db.dsn, sql, hex, sizeof hex, errbuf) != SVC_OK)
        return NULL;
    {
        char *sp = strchr(hex, ' ');
        assert_non_null(sp);
        *sp = '\0';
        if (strlen(hex) >= cap)
            return NULL;
        memcpy(ce_type, hex, strlen(hex) + 1);
        for (const char *p = sp + 1; p[0] != '\0' && p[1] != '\0' && n < sizeof bin; p += 2) {
            unsigned v;
            sscanf(p, "%2x", &v);
            bin[n++] = (uint8_t)v;
        }
    }
    return unpack(bin, n);
}

static void *unpack_reserved(const uint8_t *b, size_t n)
{
    return shopmicro__events__v1__stock_reserved__unpack(NULL, n, b);
}

static void *unpack_rejected(const uint8_t *b, size_t n)
{
    return shopmicro__events__v1__stock_rejected__unpack(NULL, n, b);
}

static void reserves_all_lines_once(void **state)
{
    fx_t *f = *state;
    char a[37], b[37], oid[37], eid[37], type[128], reason[KFK_REASON_LEN];
    const char *ids[] = {a, b};
    const int32_t qty[] = {3, 2};
    Shopmicro__Events__V1__StockReserved *ev;

    product(f, 10, a);
    product(f, 5, b);
    it_random_uuid(oid);
    it_random_uuid(eid);
    assert_verdict(order(f, eid, oid, ids, qty, 2, reason), KFK_HANDLED, reason);
    assert_int_equal(stock_of(f, a), 7);
    assert_int_equal(stock_of(f, b), 3);
    ev = last_event(f, oid, type, sizeof type, unpack_reserved);
    assert_non_null(ev);
    assert_string_equal(type, CAT_SAGA_RESERVED);
    assert_string_equal(ev->order_id, oid);
    assert_int_equal(ev->n_lines, 2);
    assert_string_equal(ev->lines[0]->product_id, a);
    assert_int_equal(ev->lines[0]->quantity, 3);
    assert_true(it_is_recent_rfc3339_utc(ev->reserved_at, 60));
    shopmicro__events__v1__stock_reserved__free_unpacked(ev, NULL);

    /* The same event again (a redelivery): nothing moves. */
    assert_verdict(order(f, eid, oid, ids, qty, 2, reason), KFK_DUPLICATE, reason);
    /* The same order under another event id: nothing moves either. */
    it_random_uuid(eid);
    assert_verdict(order(f, eid, oid, ids, qty, 2, reason), KFK_DUPLICATE, reason);
    assert_int_equal(stock_of(f, a), 7);
    assert_int_equal(stock_of(f, b), 3);
    {
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox WHERE aggregate_id = '%s'", oid);
        assert_int_equal(count(f, sql), 1);
        snprintf(sql, sizeof sql,
                 "SELECT sum(quantity) FROM stock_reservations WHERE order_id = '%s'", oid);
        assert_int_equal(count(f, sql), 5);
    }
}

static void rejects_all_or_nothing(void **state)
{
    fx_t *f = *state;
    char p[10][37], oid[37], eid[37], ghost[37], type[128], reason[KFK_REASON_LEN];
    const char *ids[10];
    int32_t qty[10];
    Shopmicro__Events__V1__StockRejected *ev;

    for (int i = 0; i < 10; i++) {
        product(f, 4, p[i]);
        ids[i] = p[i];
        qty[i] = i == 6 ? 5 : 4; /* line 7 wants one more than there is */
    }
    it_random_uuid(oid);
    it_random_uuid(eid);
    assert_verdict(order(f, eid, oid, ids, qty, 10, reason), KFK_HANDLED, reason);
    for (int i = 0; i < 10; i++)
        assert_int_equal(stock_of(f, p[i]), 4);
    ev = last_event(f, oid, type, sizeof type, unpack_rejected);
    assert_non_null(ev);
    assert_string_equal(type, CAT_SAGA_REJECTED);
    assert_int_equal(ev->n_shortages, 1);
    assert_string_equal(ev->shortages[0]->product_id, p[6]);
    assert_int_equal(ev->shortages[0]->wanted, 5);
    assert_int_equal(ev->shortages[0]->available, 4);
    assert_false(ev->shortages[0]->unknown_product);
    shopmicro__events__v1__stock_rejected__free_unpacked(ev, NULL);

    /* Unknown products: a UUID no product has, and an id that is no UUID;
     * every shortage is named, not only the first. */
    it_random_uuid(ghost);
    ids[0] = ghost;
    ids[1] = "not-a-product";
    qty[0] = qty[1] = 1;
    it_random_uuid(oid);
    it_random_uuid(eid);
    assert_verdict(order(f, eid, oid, ids, qty, 3, reason), KFK_HANDLED, reason);
    ev = last_event(f, oid, type, sizeof type, unpack_rejected);
    assert_non_null(ev);
    assert_int_equal(ev->n_shortages, 2);
    assert_true(ev->shortages[0]->unknown_product);
    assert_string_equal(ev->shortages[1]->product_id, "not-a-product");
    assert_true(ev->shortages[1]->unknown_product);
    shopmicro__events__v1__stock_rejected__free_unpacked(ev, NULL);
    assert_int_equal(stock_of(f, p[2]), 4);
}

static void poison_writes_nothing(void **state)
{
    fx_t *f = *state;
    char a[37], oid[37], eid[37], reason[KFK_REASON_LEN];
    const char *ids[] = {a};
    const int32_t qty[] = {1}, zero[] = {0};
    uint8_t buf[512];
    size_t len;
    int64_t before = count(f, "SELECT count(*) FROM processed_events");

    product(f, 3, a);
    it_random_uuid(oid);
    it_random_uuid(eid);
    len = order_created(oid, ids, qty, 1, buf, sizeof buf);
    assert_verdict(hand(f->saga, eid, "shopmicro.order.v2.OrderCreated", buf, len, reason),
                   KFK_POISON, reason);
    assert_non_null(strstr(reason, "newer schema"));
    assert_verdict(hand(f->saga, eid, "shopmicro.order.v1.OrderShipped", buf, len, reason),
                   KFK_POISON, reason);
    assert_verdict(hand(f->saga, eid, NULL, buf, len, reason), KFK_POISON, reason);
    assert_verdict(hand(f->saga, NULL, "shopmicro.order.v1.OrderCreated", buf, len, reason),
                   KFK_POISON, reason);
    assert_non_null(strstr(reason, "ce_id"));
    assert_verdict(hand(f->saga, eid, "shopmicro.order.v1.OrderCreated", "\xff\xff\xff", 3, reason),
                   KFK_POISON, reason);
    len = order_created(oid, ids, zero, 1, buf, sizeof buf);
    assert_verdict(hand(f->saga, eid, "shopmicro.order.v1.OrderCreated", buf, len, reason),
                   KFK_POISON, reason);
    len = order_created("not-an-order-id", ids, qty, 1, buf, sizeof buf);
    assert_verdict(hand(f->saga, eid, "shopmicro.order.v1.OrderCreated", buf, len, reason),
                   KFK_POISON, reason);
    /* The order's own status events pass by. */
    assert_verdict(hand(f->saga, eid, "shopmicro.order.v1.OrderConfirmed", "", 0, reason),
                   KFK_HANDLED, reason);
    assert_int_equal(count(f, "SELECT count(*) FROM processed_events"), before);
    assert_int_equal(stock_of(f, a), 3);
}

/* A batch (kfk_batch_ops_t): three records in one transaction. The second
 * order sees the stock the first took; the repeat of the first is a
 * duplicate; a rollback undoes all of it; a commit keeps all of it. */
static void a_batch_shares_one_transaction(void **state)
{
    fx_t *f = *state;
    char a[37], o1[37], o2[37], e1[37], e2[37], reason[KFK_REASON_LEN], errbuf[SVC_ERRBUF_LEN];
    const char *ids[] = {a};
    const int32_t three[] = {3}, two[] = {2};
    uint8_t b1[512], b2[512];
    size_t l1, l2;
    uint64_t deadline_ms = svc_now_ms() + (uint64_t)it_ms(10000);

    product(f, 4, a);
    it_random_uuid(o1);
    it_random_uuid(o2);
    it_random_uuid(e1);
    it_random_uuid(e2);
    l1 = order_created(o1, ids, three, 1, b1, sizeof b1);
    l2 = order_created(o2, ids, two, 1, b2, sizeof b2);
    for (int round = 0; round < 2; round++) { /* rolled back, then committed */
        assert_int_equal(cat_saga_batch_ops.begin(f->saga, deadline_ms, errbuf), SVC_OK);
        assert_verdict(
            hand_in_tx(f->saga, e1, "shopmicro.order.v1.OrderCreated", b1, l1, true, reason),
            KFK_HANDLED, reason);
        assert_verdict(
            hand_in_tx(f->saga, e2, "shopmicro.order.v1.OrderCreated", b2, l2, true, reason),
            KFK_HANDLED, reason);
        assert_verdict(
            hand_in_tx(f->saga, e1, "shopmicro.order.v1.OrderCreated", b1, l1, true, reason),
            KFK_DUPLICATE, reason);
        if (round == 0) {
            cat_saga_batch_ops.rollback(f->saga);
            assert_int_equal(stock_of(f, a), 4);
        } else {
            assert_int_equal(cat_saga_batch_ops.commit(f->saga, deadline_ms, errbuf), SVC_OK);
        }
    }
    assert_int_equal(stock_of(f, a), 1); /* o1 took 3; o2 wanted 2 of the 1 left */
    {
        char sql[200];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM stock_decisions WHERE order_id IN "
                 "('%s', '%s')",
                 o1, o2);
        assert_int_equal(count(f, sql), 2);
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM stock_decisions WHERE order_id = '%s' "
                 "AND outcome = 'REJECTED'",
                 o2);
        assert_int_equal(count(f, sql), 1);
    }
}

static void database_down_asks_for_a_retry(void **state)
{
    fx_t *f = *state;
    char dsn[128], a[37], oid[37], eid[37], reason[KFK_REASON_LEN], errbuf[SVC_ERRBUF_LEN];
    const char *ids[] = {a};
    const int32_t qty[] = {1};
    uint8_t buf[512];
    size_t len;
    cat_saga_t *down = NULL;

    /* A port nothing listens on: the same as a database that is down. */
    snprintf(dsn, sizeof dsn, "host=127.0.0.1 port=1 dbname=x user=postgres connect_timeout=2");
    assert_int_equal(cat_saga_new_detached(dsn, 1000, &down, errbuf), SVC_OK);
    it_random_uuid(a);
    it_random_uuid(oid);
    it_random_uuid(eid);
    len = order_created(oid, ids, qty, 1, buf, sizeof buf);
    assert_verdict(hand(down, eid, "shopmicro.order.v1.OrderCreated", buf, len, reason), KFK_RETRY,
                   reason);
    assert_non_null(strstr(reason, "database"));
    cat_saga_stop(down);
    (void)f;
}

/* ---- 8 threads, 4 products, demand about twice the stock ---- */
#define RACE_THREADS  8
#define RACE_ORDERS   25
#define RACE_PRODUCTS 4

typedef struct racer {
    fx_t *f;
    char (*ids)[37];
    unsigned seed;
    int handled;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    char errbuf[SVC_ERRBUF_LEN], reason[KFK_REASON_LEN];
    cat_saga_t *s = NULL;

    if (cat_saga_new_detached(r->f->cat->db.dsn, 5000, &s, errbuf) != SVC_OK)
        return NULL;
    for (int i = 0; i < RACE_ORDERS; i++) {
        char oid[37], eid[37];
        const char *ids[2];
        int32_t qty[2];
        uint8_t buf[512];
        size_t len;
        int k = (int)(rand_r(&r->seed) % RACE_PRODUCTS);

        ids[0] = r->ids[k];
        ids[1] = r->ids[(k + 1) % RACE_PRODUCTS];
        qty[0] = 1 + (int32_t)(rand_r(&r->seed) % 3);
        qty[1] = 1;
        it_random_uuid(oid);
        it_random_uuid(eid);
        len = order_created(oid, ids, qty, 2, buf, sizeof buf);
        if (hand(s, eid, "shopmicro.order.v1.OrderCreated", buf, len, reason) == KFK_HANDLED)
            r->handled++;
    }
    cat_saga_stop(s);
    return NULL;
}

static void concurrent_reservations_never_oversell(void **state)
{
    fx_t *f = *state;
    char ids[RACE_PRODUCTS][37], sql[256];
    pthread_t th[RACE_THREADS];
    racer_t rc[RACE_THREADS];
    const int32_t initial = 100; /* demand: 8 * 25 * (2 + 1) / 4 ~ 150 per product */
    int handled = 0;

    for (int i = 0; i < RACE_PRODUCTS; i++)
        product(f, initial, ids[i]);
    for (int i = 0; i < RACE_THREADS; i++) {
        rc[i] = (racer_t){.f = f, .ids = ids, .seed = (unsigned)(i * 7919 + 1)};
        assert_int_equal(pthread_create(&th[i], NULL, race, &rc[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++) {
        pthread_join(th[i], NULL);
        handled += rc[i].handled;
    }
    assert_int_equal(handled, RACE_THREADS * RACE_ORDERS);
    for (int i = 0; i < RACE_PRODUCTS; i++) {
        int64_t now = stock_of(f, ids[i]), taken;

        snprintf(sql, sizeof sql,
                 "SELECT COALESCE(sum(quantity), 0) FROM stock_reservations "
                 "WHERE product_id = '%s'",
                 ids[i]);
        taken = count(f, sql);
        fprintf(stderr, "product %d: stock %d -> %lld, %lld reserved\n", i, initial, (long long)now,
                (long long)taken);
        assert_true(now >= 0);
        assert_int_equal(initial - taken, now);
    }
    /* Demand exceeds the stock, so some orders were turned away; and every
     * decision (of this test and the ones before) has exactly one event. */
    snprintf(sql, sizeof sql,
             "SELECT count(DISTINCT order_id) FROM stock_reservations WHERE product_id IN "
             "('%s', '%s', '%s', '%s')",
             ids[0], ids[1], ids[2], ids[3]);
    assert_true(count(f, sql) < RACE_THREADS * RACE_ORDERS);
    assert_true(count(f, sql) > 0);
    assert_int_equal(count(f, "SELECT count(*) FROM stock_decisions"),
                     count(f, "SELECT count(*) FROM outbox"));
    assert_int_equal(count(f, "SELECT count(*) FROM stock_decisions d WHERE (SELECT count(*) "
                              "FROM outbox o WHERE o.aggregate_id = d.order_id::text) <> 1"),
                     0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reserves_all_lines_once),
        cmocka_unit_test(rejects_all_or_nothing),
        cmocka_unit_test(poison_writes_nothing),
        cmocka_unit_test(a_batch_shares_one_transaction),
        cmocka_unit_test(database_down_asks_for_a_retry),
        cmocka_unit_test(concurrent_reservations_never_oversell),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests(tests, setup, teardown);
    cat_it_global_fini();
    return rc;
}
