/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OrderService against the real catalog and order binaries and real
 * Postgres: live pricing (and prices frozen into the order), the one
 * transaction of order + items + outbox row, GetOrder, unknown products and
 * orders, field validation, idempotency keys (replay, misuse, an 8-way race)
 * and a SIGTERM that drains an in-flight CreateOrder.
 *
 * One catalog and one order service serve the whole group (the last test
 * stops the order service); tests compare row counts before and after.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "order_it.h"

#define WAITING_ON(table)                                                                          \
    "SELECT count(*) FROM pg_locks WHERE relation = '" table "'::regclass AND NOT granted"

static int group_setup(void **state)
{
    /* Expiry on every CreateOrder, so a test can watch it work. */
    static const char *const env[] = {"ORDER_WORKERS=8", "ORDER_IDEMPOTENCY_CLEANUP_EVERY=1", NULL};

    return ord_it_setup(state, NULL, env);
}

static ord_it_counts_t plus(ord_it_counts_t c, int orders, int items, int outbox, int keys)
{
    c.orders += orders;
    c.items += items;
    c.outbox += outbox;
    c.keys += keys;
    return c;
}

/* ------------------------------------------------------------------ */

/* The services of these tests consume nothing: with a consumer they would
 * join whatever broker listens on the default port (a user's stack) and
 * take its events. An empty variable would not do: it means the default. */
static void no_saga_consumer_joins_a_broker(void **state)
{
    ord_it_t *t = *state;

    assert_true(spawn_log_contains(t->ord, "config ORDER_KAFKA_BROKERS=none"));
    assert_true(spawn_log_contains(t->ord, "ORDER_KAFKA_BROKERS=none: no saga consumer"));
    assert_false(spawn_log_contains(t->ord, "consumer started"));
    assert_true(spawn_log_contains(t->cat, "config CATALOG_KAFKA_BROKERS=none"));
    assert_false(spawn_log_contains(t->cat, "consumer started"));
}

static void create_prices_live_and_writes_one_transaction(void **state)
{
    ord_it_t *t = *state;
    char a[37], b[37], sql[1024], got[1024], want[1024];
    it_item_t items[3] = {{a, 2}, {b, 3}, {a, 1}};
    ord_it_counts_t before = ord_it_counts(t);
    it_created_t *c = NULL, *c2 = NULL;
    it_order_t *o = NULL;
    rpc_result_t res;

    ord_it_product(t, "Mug", 1299, a);
    ord_it_product(t, "Tea", 250, b);
    it_order_create(t->ord_ch, "cust-1", items, 3, NULL, 0, &c, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_true(it_is_uuid(c->id));
    assert_int_equal(c->status, ORD_IT_PENDING);
    assert_int_equal(c->total_cents, 3 * 1299 + 3 * 250); /* a merged: 2 + 1 */
    ord_it_assert_counts(ord_it_counts(t), plus(before, 1, 2, 1, 0));

    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM orders WHERE id = '%s' AND customer_id = 'cust-1' "
             "AND status = 'PENDING' AND total_cents = 4647",
             c->id);
    assert_int_equal(ord_it_int(t, sql), 1);
    snprintf(sql, sizeof sql,
             "SELECT string_agg(position || ':' || product_id || ':' || quantity || ':' || "
             "unit_price_cents, ',' ORDER BY position) FROM order_items WHERE order_id = '%s'",
             c->id);
    ord_it_text(t, sql, got, sizeof got);
    snprintf(want, sizeof want, "0:%s:3:1299,1:%s:3:250", a, b);
    assert_string_equal(got, want);

    /* The outbox row: one, unpublished, its payload built from the rows. */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM outbox WHERE aggregate_type = 'order' AND aggregate_id = '%s' "
             "AND event_type = 'OrderCreated' AND id IN (SELECT id FROM outbox_pending)",
             c->id);
    assert_int_equal(ord_it_int(t, sql), 1);
    snprintf(sql, sizeof sql,
             "SELECT concat_ws('|', x.payload->>'order_id', x.payload->>'customer_id', "
             "jsonb_typeof(x.payload->'total_cents'), x.payload->>'total_cents', "
             "jsonb_array_length(x.payload->'items'), "
             "x.payload->'items'->0->>'product_id', x.payload->'items'->0->>'quantity', "
             "x.payload->'items'->0->>'unit_price_cents', "
             "x.payload->'items'->1->>'product_id', x.payload->'items'->1->>'quantity', "
             "x.payload->'items'->1->>'unit_price_cents', "
             "x.payload->>'created_at' = to_char(o.created_at AT TIME ZONE 'UTC', "
             "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), x.created_at = o.created_at) "
             "FROM outbox x JOIN orders o ON o.id::text = x.aggregate_id "
             "WHERE x.aggregate_id = '%s'",
             c->id);
    ord_it_text(t, sql, got, sizeof got);
    snprintf(want, sizeof want, "%s|cust-1|number|4647|2|%s|3|1299|%s|3|250|t|t", c->id, a, b);
    assert_string_equal(got, want);

    /* The catalog changes a price afterwards: the order keeps the price it
     * was made with, and the next order pays the new one (no cache). */
    snprintf(sql, sizeof sql, "UPDATE products SET price_cents = 9999 WHERE id = '%s'", a);
    assert_int_equal(pgtest_exec(t->cat_db.dsn, sql, SVC_ERRBUF_SCRATCH), SVC_OK);
    it_order_get(t->ord_ch, c->id, 0, &o, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(o->n_items, 2);
    assert_int_equal(o->items[0]->unit_price_cents, 1299);
    assert_int_equal(o->total_cents, 4647);
    snprintf(sql, sizeof sql,
             "SELECT unit_price_cents FROM order_items WHERE order_id = '%s' AND position = 0",
             c->id);
    assert_int_equal(ord_it_int(t, sql), 1299);
    it_order_create(t->ord_ch, "cust-1", items, 1, NULL, 0, &c2, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(c2->total_cents, 2 * 9999);
    it_free(c);
    it_free(c2);
    it_free(o);
}

static void get_order_returns_items_total_status_and_time(void **state)
{
    ord_it_t *t = *state;
    char a[37], b[37];
    it_item_t items[2] = {{b, 1}, {a, 4}};
    it_created_t *c = NULL;
    it_order_t *o = NULL;
    rpc_result_t res;

    ord_it_product(t, "Pen", 120, a);
    ord_it_product(t, "Ink", 75, b);
    it_order_create(t->ord_ch, "cust-get", items, 2, NULL, 0, &c, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    it_order_get(t->ord_ch, c->id, 0, &o, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_string_equal(o->id, c->id);
    assert_string_equal(o->customer_id, "cust-get");
    assert_int_equal(o->status, ORD_IT_PENDING);
    assert_int_equal(o->total_cents, 75 + 4 * 120);
    assert_int_equal(o->n_items, 2); /* in request order */
    assert_string_equal(o->items[0]->product_id, b);
    assert_int_equal(o->items[0]->quantity, 1);
    assert_int_equal(o->items[0]->unit_price_cents, 75);
    assert_string_equal(o->items[1]->product_id, a);
    assert_int_equal(o->items[1]->quantity, 4);
    assert_int_equal(o->items[1]->unit_price_cents, 120);
    if (!it_is_recent_rfc3339_utc(o->created_at, 60))
        fail_msg("created_at \"%s\" is not a recent RFC 3339 UTC time", o->created_at);
    it_free(c);
    it_free(o);
}

static void unknown_product_is_invalid_argument_and_writes_nothing(void **state)
{
    ord_it_t *t = *state;
    char a[37], missing[37], want[64];
    it_item_t items[2] = {{a, 1}, {missing, 1}};
    ord_it_counts_t before;
    it_created_t *c = NULL;
    rpc_result_t res;

    ord_it_product(t, "Cup", 500, a);
    it_random_uuid(missing);
    before = ord_it_counts(t);
    it_order_create(t->ord_ch, "cust-2", items, 2, NULL, 0, &c, &res);
    snprintf(want, sizeof want, "unknown product %s", missing);
    IT_ASSERT_ERROR(res, SVC_EINVAL, want);
    items[1].product_id = "not-a-product";
    it_order_create(t->ord_ch, "cust-2", items, 2, "key-unknown-product", 0, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "unknown product not-a-product");
    assert_null(c);
    ord_it_assert_counts(ord_it_counts(t), before);
}

static void unknown_or_malformed_order_id_is_not_found(void **state)
{
    ord_it_t *t = *state;
    const char *ids[] = {NULL, "nope", "", "00000000-0000-0000-0000-00000000000g"};
    char missing[37];
    it_order_t *o = NULL;
    rpc_result_t res;

    it_random_uuid(missing);
    ids[0] = missing;
    for (size_t i = 0; i < SVC_COUNTOF(ids); i++) {
        it_order_get(t->ord_ch, ids[i], 0, &o, &res);
        IT_ASSERT_ERROR(res, SVC_ENOTFOUND, "order not found");
        assert_null(o);
    }
}

static void invalid_fields_are_named_and_nothing_is_written(void **state)
{
    ord_it_t *t = *state;
    char a[37], long_key[257];
    it_item_t items[2] = {{a, 1}, {a, 0}};
    ord_it_counts_t before;
    it_created_t *c = NULL;
    rpc_result_t res;

    ord_it_product(t, "Box", 10, a);
    before = ord_it_counts(t);
    it_order_create(t->ord_ch, "cust-3", items, 2, NULL, 0, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "items[1].quantity must be 1-1000");
    it_order_create(t->ord_ch, "cust-3", items, 0, NULL, 0, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "items must have 1-100 entries");
    memset(long_key, 'k', 256);
    long_key[256] = '\0';
    it_order_create(t->ord_ch, "cust-3", items, 1, long_key, 0, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "idempotency-key must be 1-255 printable ASCII");
    /* a space is legal gRPC metadata, but not part of a key: refused, not ignored */
    it_order_create(t->ord_ch, "cust-3", items, 1, "my key", 0, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "idempotency-key must be 1-255 printable ASCII");
    ord_it_assert_counts(ord_it_counts(t), before);
}

/* The owner rule on the gRPC API itself (services/order/caller.h), as the
 * gateway passes the caller: a call without one, or for another customer,
 * writes nothing; an order without customer_id is the caller's; another
 * customer reads it as an unknown id, its owner and an admin read it. */
static void orders_belong_to_the_caller(void **state)
{
    ord_it_t *t = *state;
    char a[37];
    it_item_t items[1] = {{a, 1}};
    ord_it_counts_t before;
    it_created_t *c = NULL;
    it_order_t *o = NULL;
    rpc_result_t res;

    ord_it_product(t, "Tray", 300, a);
    before = ord_it_counts(t);
    it_order_create_as(t->ord_ch, NULL, NULL, "cust-9", items, 1, NULL, 0, 0, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EUNAUTH, "no valid caller (x-shopmicro-subject)");
    it_order_create_as(t->ord_ch, "cust-9", "orders:read", "cust-9", items, 1, NULL, 0, 0, &c,
                       &res);
    IT_ASSERT_ERROR(res, SVC_EPERM, "lacks the scope orders:write");
    it_order_create_as(t->ord_ch, "cust-9", "orders:write", "cust-10", items, 1, NULL, 0, 0, &c,
                       &res);
    IT_ASSERT_ERROR(res, SVC_EPERM, "customer_id names another customer");
    ord_it_assert_counts(ord_it_counts(t), before);

    it_order_create_as(t->ord_ch, "cust-9", "orders:write", "", items, 1, NULL, 0, 0, &c, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    it_order_get_as(t->ord_ch, "cust-10", "orders:read", c->id, 0, &o, &res);
    IT_ASSERT_ERROR(res, SVC_ENOTFOUND, "order not found");
    assert_null(o);
    it_order_get_as(t->ord_ch, "cust-9", "orders:write", c->id, 0, &o, &res);
    IT_ASSERT_ERROR(res, SVC_EPERM, "lacks the scope");
    it_order_get_as(t->ord_ch, "cust-9", "orders:read", c->id, 0, &o, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_string_equal(o->customer_id, "cust-9");
    it_free(o);
    it_order_get_as(t->ord_ch, "support-1", "orders:admin", c->id, 0, &o, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_string_equal(o->customer_id, "cust-9");
    it_free(o);
    it_free(c);
}

/* A key given in two metadata entries (HTTP/2 allows it; a proxy may add
 * one) is ambiguous, even twice the same: refused naming it, nothing
 * written, and neither value is taken for a key. */
static void repeated_key_is_refused_and_nothing_is_written(void **state)
{
    ord_it_t *t = *state;
    char a[37], k1[48], k2[48];
    it_item_t items[1] = {{a, 1}};
    rpc_md_t md[3] = {
        {"idempotency-key", k1}, {"x-request-id", "repeated-key"}, {"idempotency-key", k2}};
    ord_it_counts_t before;
    it_created_t *c = NULL;
    rpc_result_t res;

    ord_it_product(t, "Stapler", 450, a);
    it_random_uuid(k1);
    it_random_uuid(k2);
    before = ord_it_counts(t);
    it_order_create_md(t->ord_ch, "cust-6", items, 1, md, 3, 0, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "idempotency-key must be given once");
    md[2].value = k1;
    it_order_create_md(t->ord_ch, "cust-6", items, 1, md, 3, 0, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "idempotency-key must be given once");
    ord_it_assert_counts(ord_it_counts(t), before);
    /* each key alone is still unused: the refused calls kept nothing */
    it_order_create(t->ord_ch, "cust-6", items, 1, k2, 0, &c, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    it_free(c);
    ord_it_assert_counts(ord_it_counts(t), plus(before, 1, 1, 1, 1));
}

/* The longest key and every character a key may have are stored and
 * compared byte for byte (the table's CHECK agrees with the service). */
static void keys_are_honoured_byte_for_byte(void **state)
{
    ord_it_t *t = *state;
    char a[37], keys[2][256], uuid[37];
    it_item_t items[1] = {{a, 1}};
    it_created_t *c1 = NULL, *c2 = NULL;
    ord_it_counts_t before;
    rpc_result_t res;

    ord_it_product(t, "Pen", 120, a);
    it_random_uuid(uuid);
    memset(keys[0], 'k', 255);
    memcpy(keys[0], uuid, 36);
    keys[0][255] = '\0';
    for (int c = 0x21; c <= 0x7e; c++)
        keys[1][c - 0x21] = (char)c;
    memcpy(keys[1] + 0x7e - 0x21 + 1, uuid, 37);
    for (int k = 0; k < 2; k++) {
        before = ord_it_counts(t);
        it_order_create(t->ord_ch, "cust-5", items, 1, keys[k], 0, &c1, &res);
        IT_ASSERT_CODE(res, SVC_OK);
        it_order_create(t->ord_ch, "cust-5", items, 1, keys[k], 0, &c2, &res);
        IT_ASSERT_CODE(res, SVC_OK);
        assert_string_equal(c2->id, c1->id);
        ord_it_assert_counts(ord_it_counts(t), plus(before, 1, 1, 1, 1));
        it_free(c1);
        it_free(c2);
    }
}

static void same_key_same_request_replays_the_first_response(void **state)
{
    ord_it_t *t = *state;
    char a[37], b[37], key[64], uuid[37], sql[256];
    it_item_t first[2] = {{a, 2}, {b, 1}};
    it_item_t reordered[3] = {{b, 1}, {a, 1}, {a, 1}}; /* the same order, said differently */
    it_item_t other[1] = {{a, 3}};
    ord_it_counts_t before;
    it_created_t *c1 = NULL, *c2 = NULL, *c3 = NULL;
    rpc_result_t res;

    ord_it_product(t, "Lamp", 3000, a);
    ord_it_product(t, "Bulb", 150, b);
    it_random_uuid(uuid);
    snprintf(key, sizeof key, "key-%s", uuid);
    before = ord_it_counts(t);
    it_order_create(t->ord_ch, "cust-4", first, 2, key, 0, &c1, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(c1->total_cents, 6150);
    ord_it_assert_counts(ord_it_counts(t), plus(before, 1, 2, 1, 1));

    /* The price changes; the replay still answers what the first call did. */
    snprintf(sql, sizeof sql, "UPDATE products SET price_cents = 1 WHERE id = '%s'", a);
    assert_int_equal(pgtest_exec(t->cat_db.dsn, sql, SVC_ERRBUF_SCRATCH), SVC_OK);
    it_order_create(t->ord_ch, "cust-4", reordered, 3, key, 0, &c2, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_string_equal(c2->id, c1->id);
    assert_int_equal(c2->status, c1->status);
    assert_int_equal(c2->total_cents, 6150);

    it_order_create(t->ord_ch, "cust-4", other, 1, key, 0, &c3, &res);
    IT_ASSERT_ERROR(res, SVC_EEXIST, "idempotency key reused with a different request");
    it_order_create(t->ord_ch, "cust-other", first, 2, key, 0, &c3, &res);
    IT_ASSERT_ERROR(res, SVC_EEXIST, "idempotency key reused with a different request");
    ord_it_assert_counts(ord_it_counts(t), plus(before, 1, 2, 1, 1));
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM idempotency_keys WHERE key = '%s' "
             "AND order_id = '%s' AND total_cents = 6150",
             key, c1->id);
    assert_int_equal(ord_it_int(t, sql), 1);
    it_free(c1);
    it_free(c2);
}

/* The saga moves an order after its key was written (tests/integration/order/
 * test_order_saga.c does it through Kafka; here SQL stands in for it): a
 * replay answers the status as it is now, GetOrder the reason too. */
static void get_and_replay_show_the_current_status_and_reason(void **state)
{
    ord_it_t *t = *state;
    char a[37], key[64], uuid[37], sql[512];
    it_item_t items[1] = {{a, 2}};
    it_created_t *c1 = NULL, *c2 = NULL;
    it_order_t *o = NULL;
    rpc_result_t res;

    ord_it_product(t, "Kettle", 2500, a);
    it_random_uuid(uuid);
    snprintf(key, sizeof key, "key-saga-%s", uuid);
    it_order_create(t->ord_ch, "cust-saga", items, 1, key, 0, &c1, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(c1->status, ORD_IT_PENDING);
    it_order_get(t->ord_ch, c1->id, 0, &o, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_string_equal(o->cancel_reason, "");
    it_free(o);

    snprintf(sql, sizeof sql,
             "UPDATE orders SET status = 'CANCELLED', cancel_reason = 'insufficient stock: "
             "product %s wanted 2, available 1' WHERE id = '%s'",
             a, c1->id);
    assert_int_equal(pgtest_exec(t->ord_db.dsn, sql, SVC_ERRBUF_SCRATCH), SVC_OK);
    it_order_get(t->ord_ch, c1->id, 0, &o, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(o->status, ORD_IT_CANCELLED);
    snprintf(sql, sizeof sql, "insufficient stock: product %s wanted 2, available 1", a);
    assert_string_equal(o->cancel_reason, sql);
    it_free(o);
    it_order_create(t->ord_ch, "cust-saga", items, 1, key, 0, &c2, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_string_equal(c2->id, c1->id);
    assert_int_equal(c2->status, ORD_IT_CANCELLED); /* now, not at creation */
    assert_int_equal(c2->total_cents, 5000);
    it_free(c1);
    it_free(c2);
}

#define EXPIRED_ONE "expired 1 idempotency keys older than 172800 s"

/* Keys live ORDER_IDEMPOTENCY_TTL_S (48 h by default, never under 24 h);
 * workers delete older ones as they go (here on every CreateOrder). */
static void expired_keys_are_deleted_and_younger_ones_kept(void **state)
{
    ord_it_t *t = *state;
    char a[37], sql[512];
    it_item_t items[1] = {{a, 1}};
    it_created_t *c = NULL;
    rpc_result_t res;
    size_t expired_before = spawn_log_count(t->ord, EXPIRED_ONE);

    ord_it_product(t, "Old", 5, a);
    it_order_create(t->ord_ch, "cust-ttl", items, 1, NULL, 0, &c, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    snprintf(sql, sizeof sql,
             "INSERT INTO idempotency_keys (key, request_hash, order_id, status, total_cents, "
             "created_at) VALUES "
             "('ttl-49h', 'h', '%s', 'PENDING', 5, now() - interval '49 hours'), "
             "('ttl-47h', 'h', '%s', 'PENDING', 5, now() - interval '47 hours')",
             c->id, c->id);
    assert_int_equal(pgtest_exec(t->ord_db.dsn, sql, SVC_ERRBUF_SCRATCH), SVC_OK);
    it_free(c);
    it_order_create(t->ord_ch, "cust-ttl", items, 1, NULL, 0, &c, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    it_free(c);
    assert_int_equal(ord_it_int(t, "SELECT count(*) FROM idempotency_keys WHERE key = 'ttl-49h'"),
                     0);
    assert_int_equal(ord_it_int(t, "SELECT count(*) FROM idempotency_keys WHERE key = 'ttl-47h'"),
                     1);
    assert_int_equal(spawn_log_count(t->ord, EXPIRED_ONE), expired_before + 1);
}

#define RACERS 8

typedef struct racer {
    ord_it_t *t;
    const char *key;
    const it_item_t *items;
    pthread_barrier_t *go;
    rpc_result_t res;
    char id[40];
    int64_t total;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    it_created_t *c = NULL;

    pthread_barrier_wait(r->go);
    if (it_order_create(r->t->ord_ch, "racer", r->items, 2, r->key, 10000, &c, &r->res) == SVC_OK) {
        snprintf(r->id, sizeof r->id, "%s", c->id);
        r->total = c->total_cents;
    }
    it_free(c);
    return NULL;
}

/*
 * Eight calls with one key, held at the key's insert until all eight are
 * inside their transactions: the test itself holds an uncommitted row with
 * that key, so each claim waits on the test's transaction. Then the test
 * rolls back: all eight race for the key; one wins, seven wait for its
 * commit and answer with its order. (A table lock would also block the
 * workers' statement preparation on connect; a row holds only the key.)
 */
static void racing_calls_with_one_key_make_one_order(void **state)
{
    ord_it_t *t = *state;
    char a[37], b[37], key[64], uuid[37], sql[512], errbuf[SVC_ERRBUF_LEN] = "";
    it_item_t items[2] = {{a, 1}, {b, 2}};
    pthread_t th[RACERS];
    racer_t r[RACERS];
    pthread_barrier_t go;
    pgtest_conn_t *lock = NULL;
    size_t lost_before = spawn_log_count(t->ord, "idempotency key race lost");
    int64_t waiting = 0;
    ord_it_counts_t before;
    svc_err_t reached;

    ord_it_product(t, "Chair", 4500, a);
    ord_it_product(t, "Cushion", 800, b);
    it_random_uuid(uuid);
    snprintf(key, sizeof key, "race-%s", uuid);
    before = ord_it_counts(t);
    assert_int_equal(pgtest_conn_open(t->ord_db.dsn, &lock, errbuf), SVC_OK);
    snprintf(sql, sizeof sql,
             "BEGIN; INSERT INTO idempotency_keys (key, request_hash, order_id, status, "
             "total_cents) VALUES ('%s', 'held-by-the-test', gen_random_uuid(), 'PENDING', 0)",
             key);
    assert_int_equal(pgtest_conn_exec(lock, sql, errbuf), SVC_OK);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE %d = ANY(pg_blocking_pids(pid))",
             pgtest_conn_backend_pid(lock));
    pthread_barrier_init(&go, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
        r[i] = (racer_t){t, key, items, &go, {0}, "", 0};
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    /* Whatever happens, release the lock and join before asserting: the
     * threads use this stack frame. */
    reached = pgtest_wait_int_at_least(t->ord_db.dsn, sql, RACERS, it_ms(8000), &waiting, errbuf);
    assert_int_equal(pgtest_conn_exec(lock, "ROLLBACK", errbuf), SVC_OK);
    pgtest_conn_close(lock);
    for (int i = 0; i < RACERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    if (reached != SVC_OK)
        fail_msg("only %lld of %d calls were in their transactions at once", (long long)waiting,
                 RACERS);

    for (int i = 0; i < RACERS; i++) {
        IT_ASSERT_CODE(r[i].res, SVC_OK);
        assert_string_equal(r[i].id, r[0].id);
        assert_int_equal(r[i].total, 4500 + 2 * 800);
    }
    ord_it_assert_counts(ord_it_counts(t), plus(before, 1, 2, 1, 1));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox WHERE aggregate_id = '%s'", r[0].id);
    assert_int_equal(ord_it_int(t, sql), 1);
    assert_int_equal(spawn_log_count(t->ord, "idempotency key race lost") - lost_before,
                     RACERS - 1);
}

typedef struct pending_create {
    ord_it_t *t;
    const it_item_t *items;
    size_t n;
    rpc_result_t res;
    it_created_t *c;
} pending_create_t;

static void *create_in_background(void *arg)
{
    pending_create_t *p = arg;

    it_order_create(p->t->ord_ch, "cust-bg", p->items, p->n, NULL, 15000, &p->c, &p->res);
    return NULL;
}

/* Last: it stops the order service. SIGTERM while a CreateOrder waits for
 * the catalog; the call still completes, then the process exits 0. */
static void sigterm_drains_an_in_flight_create_then_exits_0(void **state)
{
    ord_it_t *t = *state;
    char a[37], sql[256], errbuf[SVC_ERRBUF_LEN] = "";
    it_item_t items[1] = {{a, 1}};
    pending_create_t p = {t, items, 1, {0}, NULL};
    pgtest_conn_t *lock = NULL;
    bool ok, draining = false;
    int wstatus = -1;
    pthread_t th;

    ord_it_product(t, "Last", 42, a);
    assert_int_equal(pgtest_conn_open(t->cat_db.dsn, &lock, errbuf), SVC_OK);
    assert_int_equal(
        pgtest_conn_exec(lock, "BEGIN; LOCK TABLE products IN ACCESS EXCLUSIVE MODE", errbuf),
        SVC_OK);
    assert_int_equal(pthread_create(&th, NULL, create_in_background, &p), 0);
    /* Every step is checked only after the lock is gone and the thread is
     * joined: it uses this stack frame. */
    ok = pgtest_wait_int_at_least(t->cat_db.dsn, WAITING_ON("products"), 1, it_ms(5000), NULL,
                                  errbuf) == SVC_OK &&
         spawn_signal(t->ord, SIGTERM) == SVC_OK &&
         spawn_log_wait(t->ord, "received SIGTERM", it_ms(5000)) == SVC_OK;
    if (ok) {
        ord_it_sleep_ms(200);
        draining = spawn_alive(t->ord);
    }
    assert_int_equal(pgtest_conn_exec(lock, "ROLLBACK", errbuf), SVC_OK);
    pgtest_conn_close(lock);
    pthread_join(th, NULL);
    assert_true(ok);
    assert_true(draining); /* it waited for the call */
    IT_ASSERT_CODE(p.res, SVC_OK);
    assert_int_equal(spawn_wait_exit(t->ord, it_ms(10000), &wstatus), SVC_OK);
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        spawn_log_dump(t->ord, 40);
        fail_msg("order did not exit 0 after SIGTERM");
    }
    assert_true(spawn_log_contains(t->ord, "stopped after a clean drain"));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM orders WHERE id = '%s'", p.c->id);
    assert_int_equal(ord_it_int(t, sql), 1);
    it_free(p.c);
    assert_int_equal(ord_it_order_stop(t), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_saga_consumer_joins_a_broker),
        cmocka_unit_test(create_prices_live_and_writes_one_transaction),
        cmocka_unit_test(get_order_returns_items_total_status_and_time),
        cmocka_unit_test(unknown_product_is_invalid_argument_and_writes_nothing),
        cmocka_unit_test(unknown_or_malformed_order_id_is_not_found),
        cmocka_unit_test(invalid_fields_are_named_and_nothing_is_written),
        cmocka_unit_test(orders_belong_to_the_caller),
        cmocka_unit_test(keys_are_honoured_byte_for_byte),
        cmocka_unit_test(repeated_key_is_refused_and_nothing_is_written),
        cmocka_unit_test(same_key_same_request_replays_the_first_response),
        cmocka_unit_test(get_and_replay_show_the_current_status_and_reason),
        cmocka_unit_test(racing_calls_with_one_key_make_one_order),
        cmocka_unit_test(expired_keys_are_deleted_and_younger_ones_kept),
        cmocka_unit_test(sigterm_drains_an_in_flight_create_then_exits_0),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests_name("order_rpc", tests, group_setup, ord_it_teardown);
    cat_it_global_fini();
    return rc;
}
