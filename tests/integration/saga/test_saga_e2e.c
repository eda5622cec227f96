/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_saga_e2e.c - the stock reservation saga end to end (issue 13), every
 * part real: a Kafka broker (deploy/local/kafka.sh), Postgres, the catalog
 * and order services with their consumers, and two relays, one per outbox
 * (the same binary on order's and on catalog's database).
 *
 *   CreateOrder -> order's outbox -> relay -> shopmicro.orders.v1
 *   -> catalog reserves (or not) -> catalog's outbox -> relay-catalog
 *   -> shopmicro.inventory.v1 -> order confirms or cancels
 *
 * Checked through the APIs a user has: GetOrder reaches CONFIRMED or
 * CANCELLED (with the reason), GetProduct shows the stock taken or not,
 * all or nothing over 10 lines. Then the whole topic is read again by a
 * catalog in a new group, and one OrderCreated injected a second time with
 * its ce_id: nothing moves. The time from CreateOrder's answer to the final
 * status is printed (not asserted: bench/ is for figures).
 */
#include <stdio.h>
#include <stdlib.h>

#include "relay_it.h"

typedef struct fx {
    rly_it_kafka_t kafka;
    cat_it_t cat;
    ord_it_t *ord;
    spawn_proc_t *relay, *relay_cat;
} fx_t;

static int setup(void **state)
{
    static fx_t f;
    char brokers[64], cbrokers[64], errbuf[SVC_ERRBUF_LEN] = "";
    const char *cat_env[] = {cbrokers, "CATALOG_ADMIN_LISTEN=127.0.0.1:0", NULL};
    const char *ord_env[] = {brokers, NULL};
    const char *relay_env[] = {"RELAY_NAME=relay-catalog", NULL};
    void *t = NULL;

    memset(&f, 0, sizeof f);
    *state = &f;
    rly_it_kafka_cleanup(&f.kafka); /* a run folder left by a killed run */
    if (rly_it_kafka(&f.kafka, "start") != SVC_OK)
        return -1;
    snprintf(cbrokers, sizeof cbrokers, "CATALOG_KAFKA_BROKERS=%s", f.kafka.brokers);
    snprintf(brokers, sizeof brokers, "ORDER_KAFKA_BROKERS=%s", f.kafka.brokers);
    if (cat_it_db_create(&f.cat, errbuf) != SVC_OK ||
        cat_it_start(&f.cat, cat_env, errbuf) != SVC_OK) {
        fprintf(stderr, "catalog: %s\n", errbuf);
        return -1;
    }
    if (ord_it_setup(&t, f.cat.addr, ord_env) != 0)
        return -1;
    f.ord = t;
    if (rly_it_relay_start(f.ord->ord_db.dsn, &f.kafka, NULL, &f.relay) != SVC_OK ||
        rly_it_relay_start(f.cat.db.dsn, &f.kafka, relay_env, &f.relay_cat) != SVC_OK)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    void *t = f->ord;
    int rc = 0;

    if (rly_it_relay_stop(&f->relay, NULL) != 0 || rly_it_relay_stop(&f->relay_cat, NULL) != 0)
        rc = -1;
    if (t != NULL && ord_it_teardown(&t) != 0)
        rc = -1; /* order must exit 0: its consumer stops cleanly */
    if (cat_it_stop(&f->cat) != 0)
        rc = -1;
    pgtest_db_drop(&f->cat.db, SVC_ERRBUF_SCRATCH);
    rly_it_kafka_cleanup(&f->kafka);
    return rc;
}

static void product(fx_t *f, int32_t stock, char id[37])
{
    it_product_t *p = NULL;
    rpc_result_t res;

    assert_int_equal(it_create(f->cat.ch, "saga e2e", "", 250, stock, 0, &p, &res), SVC_OK);
    snprintf(id, 37, "%s", p->id);
    it_free(p);
}

static int32_t stock_of(fx_t *f, const char *id)
{
    it_product_t *p = NULL;
    rpc_result_t res;
    int32_t s;

    assert_int_equal(it_get(f->cat.ch, id, 0, &p, &res), SVC_OK);
    s = p->stock;
    it_free(p);
    return s;
}

/* Places the order and waits until it leaves PENDING; returns it (owned by
 * caller, it_free) and prints how long that took. */
static it_order_t *place_and_wait(fx_t *f, const it_item_t *items, size_t n)
{
    it_created_t *c = NULL;
    it_order_t *o = NULL;
    rpc_result_t res;
    uint64_t t0, deadline;

    assert_int_equal(it_order_create(f->ord->ord_ch, "e2e", items, n, NULL, 0, &c, &res), SVC_OK);
    assert_int_equal(c->status, ORD_IT_PENDING);
    t0 = svc_now_ns();
    deadline = it_now_ms() + (uint64_t)it_ms(20000);
    for (;;) {
        assert_int_equal(it_order_get(f->ord->ord_ch, c->id, 0, &o, &res), SVC_OK);
        if (o->status != ORD_IT_PENDING || it_now_ms() > deadline)
            break;
        it_free(o);
        o = NULL;
        ord_it_sleep_ms(5);
    }
    fprintf(stderr, "order %s (%zu lines): %s %.1f ms after CreateOrder answered\n", c->id, n,
            o->status == ORD_IT_CONFIRMED   ? "CONFIRMED"
            : o->status == ORD_IT_CANCELLED ? "CANCELLED"
                                            : "still PENDING",
            ord_it_ms_since(t0));
    it_free(c);
    return o;
}

static void an_order_in_stock_is_confirmed(void **state)
{
    fx_t *f = *state;
    char a[37], b[37];
    it_order_t *o;

    product(f, 5, a);
    product(f, 2, b);
    {
        const it_item_t items[] = {{a, 2}, {b, 2}};
        o = place_and_wait(f, items, 2);
    }
    assert_int_equal(o->status, ORD_IT_CONFIRMED);
    assert_string_equal(o->cancel_reason, "");
    it_free(o);
    assert_int_equal(stock_of(f, a), 3);
    assert_int_equal(stock_of(f, b), 0);
    /* The next order for b finds no stock left. */
    {
        const it_item_t items[] = {{b, 1}};
        o = place_and_wait(f, items, 1);
    }
    assert_int_equal(o->status, ORD_IT_CANCELLED);
    assert_non_null(strstr(o->cancel_reason, b));
    it_free(o);
}

static void ten_lines_one_short_reserves_nothing(void **state)
{
    fx_t *f = *state;
    char ids[10][37];
    it_item_t items[10];
    it_order_t *o;

    for (int i = 0; i < 10; i++) {
        product(f, 3, ids[i]);
        items[i] = (it_item_t){ids[i], i == 4 ? 4 : 3};
    }
    o = place_and_wait(f, items, 10);
    assert_int_equal(o->status, ORD_IT_CANCELLED);
    fprintf(stderr, "cancel reason: %s\n", o->cancel_reason);
    assert_non_null(strstr(o->cancel_reason, ids[4]));
    assert_non_null(strstr(o->cancel_reason, "wanted 4"));
    assert_non_null(strstr(o->cancel_reason, "available 3"));
    it_free(o);
    for (int i = 0; i < 10; i++)
        assert_int_equal(stock_of(f, ids[i]), 3);
    /* And the same order without the short line goes through. */
    items[4].quantity = 3;
    o = place_and_wait(f, items, 10);
    assert_int_equal(o->status, ORD_IT_CONFIRMED);
    it_free(o);
    for (int i = 0; i < 10; i++)
        assert_int_equal(stock_of(f, ids[i]), 0);
}

/* Produces `value` with CloudEvents headers of `type` to topic. */
static void produce_raw(fx_t *f, const char *topic, const char *type, const char *key,
                        const void *value, size_t len, char ce_id[37])
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    kfk_header_t h[KFK_CE_MAX_HEADERS];
    size_t nh = 0;

    it_random_uuid(ce_id);
    {
        const kfk_ce_t ce = {ce_id, type, "/shopmicro/test", NULL, NULL, "saga-e2e-poison"};
        assert_int_equal(kfk_ce_headers(&ce, h, &nh, errbuf), SVC_OK);
    }
    assert_int_equal(
        rly_it_produce(&f->kafka, topic, key, strlen(key), value, len, h, nh, it_ms(10000)),
        SVC_OK);
}

/* Waits until `topic` holds a record whose ce_id is `id`; its dlq-reason. */
static void wait_dead_letter(fx_t *f, const char *topic, const char *id, char *reason, size_t cap)
{
    uint64_t until = it_now_ms() + (uint64_t)it_ms(20000);

    reason[0] = '\0';
    while (reason[0] == '\0' && it_now_ms() < until) {
        rly_it_record_t *rec = NULL;
        size_t n = 0;

        if (rly_it_consume_topic(&f->kafka, topic, it_ms(10000), &rec, &n) == SVC_OK)
            for (size_t i = 0; i < n; i++)
                if (strcmp(rec[i].id, id) == 0)
                    snprintf(reason, cap, "%s", rec[i].dlq_reason);
        rly_it_records_free(rec, n);
        if (reason[0] == '\0')
            ord_it_sleep_ms(200);
    }
    fprintf(stderr, "%s: %s: %s\n", topic, id, reason[0] ? reason : "(not there)");
    assert_true(reason[0] != '\0');
}

/* A record neither service can ever read, on each topic: each goes to its
 * topic's dead-letter topic with the reason, and the saga goes on. */
static void poison_on_each_topic_is_dead_lettered(void **state)
{
    fx_t *f = *state;
    char a[37], id_orders[37], id_inventory[37], key[37], reason[256];
    it_order_t *o;

    it_random_uuid(key);
    produce_raw(f, "shopmicro.orders.v1", "shopmicro.order.v1.OrderCreated", key, "\xff\xfe", 2,
                id_orders);
    produce_raw(f, "shopmicro.inventory.v1", "shopmicro.inventory.v2.StockReserved", key, "", 0,
                id_inventory);
    wait_dead_letter(f, "shopmicro.orders.v1.dlq", id_orders, reason, sizeof reason);
    assert_non_null(strstr(reason, "not an OrderCreated"));
    wait_dead_letter(f, "shopmicro.inventory.v1.dlq", id_inventory, reason, sizeof reason);
    assert_non_null(strstr(reason, "newer"));
    product(f, 1, a);
    {
        const it_item_t items[] = {{a, 1}};
        o = place_and_wait(f, items, 1);
    }
    assert_int_equal(o->status, ORD_IT_CONFIRMED);
    it_free(o);
}

static int64_t cat_count(fx_t *f, const char *sql)
{
    char errbuf[SVC_ERRBUF_LEN];
    int64_t v = -1;

    assert_int_equal(pgtest_scalar_int(f->cat.db.dsn, sql, &v, errbuf), SVC_OK);
    return v;
}

/* Waits until the catalog's log says `n` events were handled before. */
static void wait_repeats(fx_t *f, size_t n)
{
    uint64_t until = it_now_ms() + (uint64_t)it_ms(30000);

    while (spawn_log_count(f->cat.proc, "was handled before") < n && it_now_ms() < until)
        ord_it_sleep_ms(100);
    assert_int_equal(spawn_log_count(f->cat.proc, "was handled before"), n);
}

/* Last: a catalog in a new consumer group (no committed offset: it starts
 * at offset 0, as a group reset to 0 does) reads the whole topic again, and
 * then a copy of one OrderCreated with its ce_id is injected: no stock
 * moves, no event is written. */
static void a_replay_changes_nothing(void **state)
{
    fx_t *f = *state;
    char brokers[64], errbuf[SVC_ERRBUF_LEN] = "", sql[160];
    const char *env[] = {brokers, "CATALOG_CONSUMER_GROUP=catalog-replay",
                         "CATALOG_ADMIN_LISTEN=127.0.0.1:0", "CATALOG_LOG_LEVEL=debug", NULL};
    rly_it_record_t *rec = NULL, *created = NULL;
    size_t n = 0, n_created = 0;
    int64_t stock, events, decisions;

    assert_int_equal(rly_it_consume(&f->kafka, it_ms(20000), &rec, &n), SVC_OK);
    for (size_t i = 0; i < n; i++)
        if (strcmp(rec[i].type, "shopmicro.order.v1.OrderCreated") == 0 &&
            strcmp(rec[i].request_id, "saga-e2e-poison") != 0 && n_created++ == 0)
            created = &rec[i];
    assert_non_null(created);
    stock = cat_count(f, "SELECT sum(stock) FROM products");
    events = cat_count(f, "SELECT count(*) FROM outbox");
    decisions = cat_count(f, "SELECT count(*) FROM stock_decisions");
    assert_int_equal(decisions, (int64_t)n_created); /* the poison case's record is no order */

    assert_int_equal(cat_it_stop(&f->cat), 0);
    snprintf(brokers, sizeof brokers, "CATALOG_KAFKA_BROKERS=%s", f->kafka.brokers);
    assert_int_equal(cat_it_start(&f->cat, env, errbuf), SVC_OK);
    wait_repeats(f, n_created);
    {
        const kfk_ce_t ce = {created->id,   created->type,         created->source,
                             created->time, created->content_type, created->request_id};
        kfk_header_t h[KFK_CE_MAX_HEADERS];
        size_t nh = 0;

        assert_int_equal(kfk_ce_headers(&ce, h, &nh, errbuf), SVC_OK);
        assert_int_equal(rly_it_produce(&f->kafka, RLY_IT_TOPIC, created->key, strlen(created->key),
                                        created->value, created->value_len, h, nh, it_ms(10000)),
                         SVC_OK);
    }
    wait_repeats(f, n_created + 1);
    fprintf(stderr, "replay: %zu OrderCreated read again and 1 injected copy: all repeats\n",
            n_created);
    assert_int_equal(cat_count(f, "SELECT sum(stock) FROM products"), stock);
    assert_int_equal(cat_count(f, "SELECT count(*) FROM outbox"), events);
    assert_int_equal(cat_count(f, "SELECT count(*) FROM stock_decisions"), decisions);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM processed_events");
    assert_int_equal(cat_count(f, sql), (int64_t)n_created);
    rly_it_records_free(rec, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_order_in_stock_is_confirmed),
        cmocka_unit_test(ten_lines_one_short_reserves_nothing),
        cmocka_unit_test(poison_on_each_topic_is_dead_lettered),
        cmocka_unit_test(a_replay_changes_nothing),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests(tests, setup, teardown);
    cat_it_global_fini();
    return rc;
}
