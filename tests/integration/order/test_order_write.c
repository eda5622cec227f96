/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CreateOrder's write, which is one statement (services/order/store.c,
 * STMT_ORDER_CREATE): an order of the most lines a request may have, some of
 * them merged, and a customer id that needs quoting in every form it takes,
 * is written and read back exactly — rows, GetOrder, the outbox row's jsonb
 * and the protobuf the relay publishes (byte for byte what protobuf-c packs
 * for the whole event, although the statement splices its order_id and
 * created_at in); the idempotency replay of it answers exactly the first
 * response and another body under its key is refused, writing nothing; and
 * each order wakes the relays (NOTIFY outbox) while a replay does not.
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "order_it.h"
#include "shopmicro/events/v1/events.pb-c.h"

#define DISTINCT 90  /* products; the 10 more items repeat some of them */
#define ITEMS    100 /* the most a request may have */
/* A customer id is the token's subject (principal.h): the punctuation a subject may have. */
#define CUSTOMER "auth0|c-q.x_~:@+9"

typedef Shopmicro__Events__V1__OrderCreated created_ev_t;

typedef struct world {
    ord_it_t *t;
    char ids[DISTINCT][37];
    it_item_t items[ITEMS];
    int32_t qty[DISTINCT]; /* merged, by product */
    int64_t price[DISTINCT];
    int64_t total;
} world_t;

static int setup(void **state)
{
    world_t *w = calloc(1, sizeof *w);
    void *t = NULL;

    if (w == NULL || ord_it_setup(&t, NULL, NULL) != 0) {
        free(w);
        return -1;
    }
    w->t = t;
    for (int i = 0; i < DISTINCT; i++) {
        char name[32];
        snprintf(name, sizeof name, "line-%d", i);
        w->price[i] = 100 + 37 * i;
        ord_it_product(w->t, name, w->price[i], w->ids[i]);
    }
    /* Items 90..99 repeat products 0, 9, 18, ...: merged into their first line. */
    for (int i = 0; i < ITEMS; i++) {
        int p = i < DISTINCT ? i : (i - DISTINCT) * 9;
        int32_t q = i < DISTINCT ? 1 + (i * 11) % 500 : 3;
        w->items[i] = (it_item_t){w->ids[p], q};
        w->qty[p] += q;
    }
    for (int i = 0; i < DISTINCT; i++)
        w->total += w->qty[i] * w->price[i];
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    world_t *w = *state;
    void *t = w->t;
    int rc = ord_it_teardown(&t);

    free(w);
    return rc;
}

static void create(world_t *w, const char *key, it_created_t **out)
{
    rpc_result_t res;

    it_order_create(w->t->ord_ch, CUSTOMER, w->items, ITEMS, key, 0, out, &res);
    IT_ASSERT_CODE(res, SVC_OK);
}

/* The OrderCreated protobuf of the order's outbox row, as stored. */
static size_t event_pb(world_t *w, const char *order_id, uint8_t *pb, size_t cap)
{
    static char hex[65536];
    char sql[256];
    size_t n;

    snprintf(sql, sizeof sql,
             "SELECT encode(payload_pb, 'hex') FROM outbox WHERE aggregate_id = '%s'", order_id);
    ord_it_text(w->t, sql, hex, sizeof hex);
    n = strlen(hex) / 2;
    assert_true(n > 0 && n <= cap);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        pb[i] = (uint8_t)v;
    }
    return n;
}

static void the_event_is_the_order_byte_for_byte(world_t *w, const char *id)
{
    static uint8_t pb[32768], again[32768];
    char sql[512], created_at[64];
    size_t n = event_pb(w, id, pb, sizeof pb);
    created_ev_t *ev = shopmicro__events__v1__order_created__unpack(NULL, n, pb);

    assert_non_null(ev);
    snprintf(sql, sizeof sql,
             "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
             "FROM orders WHERE id = '%s'",
             id);
    ord_it_text(w->t, sql, created_at, sizeof created_at);
    assert_string_equal(ev->order_id, id);
    assert_string_equal(ev->customer_id, CUSTOMER);
    assert_string_equal(ev->created_at, created_at);
    assert_int_equal(ev->total_cents, w->total);
    assert_int_equal(ev->n_items, DISTINCT);
    for (int i = 0; i < DISTINCT; i++) {
        assert_string_equal(ev->items[i]->product_id, w->ids[i]);
        assert_int_equal(ev->items[i]->quantity, w->qty[i]);
        assert_int_equal(ev->items[i]->unit_price_cents, w->price[i]);
    }
    /* protobuf-c packs fields in number order: the same bytes mean the
     * statement's splicing gave exactly the canonical encoding. */
    assert_int_equal(shopmicro__events__v1__order_created__get_packed_size(ev), n);
    shopmicro__events__v1__order_created__pack(ev, again);
    assert_memory_equal(again, pb, n);
    shopmicro__events__v1__order_created__free_unpacked(ev, NULL);
}

static void many_lines_are_written_and_read_back_exactly(void **state)
{
    world_t *w = *state;
    ord_it_counts_t before = ord_it_counts(w->t), want = before;
    it_created_t *c = NULL;
    it_order_t *o = NULL;
    rpc_result_t res;
    char sql[2048];

    create(w, NULL, &c);
    assert_true(it_is_uuid(c->id));
    assert_int_equal(c->status, ORD_IT_PENDING);
    assert_int_equal(c->total_cents, w->total);
    want.orders++, want.items += DISTINCT, want.outbox++;
    ord_it_assert_counts(ord_it_counts(w->t), want);

    it_order_get(w->t->ord_ch, c->id, 0, &o, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_string_equal(o->customer_id, CUSTOMER);
    assert_int_equal(o->total_cents, w->total);
    assert_int_equal(o->n_items, DISTINCT);
    for (int i = 0; i < DISTINCT; i++) {
        assert_string_equal(o->items[i]->product_id, w->ids[i]);
        assert_int_equal(o->items[i]->quantity, w->qty[i]);
        assert_int_equal(o->items[i]->unit_price_cents, w->price[i]);
    }
    /* Positions 0..89, and the jsonb payload equal to the rows, in order. */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM order_items WHERE order_id = '%s' AND position BETWEEN 0 AND %d",
             c->id, DISTINCT - 1);
    assert_int_equal(ord_it_int(w->t, sql), DISTINCT);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM outbox x JOIN orders o ON o.id::text = x.aggregate_id "
             "WHERE o.id = '%s' AND x.event_type = 'OrderCreated' "
             "AND x.created_at = o.created_at AND x.payload = jsonb_build_object('order_id', o.id, "
             "'customer_id', o.customer_id, 'total_cents', o.total_cents, 'created_at', "
             "to_char(o.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
             "'items', (SELECT jsonb_agg(jsonb_build_object('product_id', i.product_id, "
             "'quantity', i.quantity, 'unit_price_cents', i.unit_price_cents) ORDER BY i.position) "
             "FROM order_items i WHERE i.order_id = o.id))",
             c->id);
    assert_int_equal(ord_it_int(w->t, sql), 1);
    the_event_is_the_order_byte_for_byte(w, c->id);
    it_free(c);
    it_free(o);
}

static void replay_is_exact_and_another_body_is_refused(void **state)
{
    world_t *w = *state;
    char key[64], uuid[37], sql[256];
    it_created_t *c = NULL, *again = NULL, *other = NULL;
    ord_it_counts_t after;
    rpc_result_t res;

    it_random_uuid(uuid);
    snprintf(key, sizeof key, "write-it-%s", uuid);
    create(w, key, &c);
    after = ord_it_counts(w->t);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM idempotency_keys k JOIN orders o ON o.id = k.order_id "
             "WHERE k.key = '%s' AND o.id = '%s' AND k.total_cents = %lld",
             key, c->id, (long long)w->total);
    assert_int_equal(ord_it_int(w->t, sql), 1);

    create(w, key, &again);
    assert_string_equal(again->id, c->id);
    assert_int_equal(again->status, c->status);
    assert_int_equal(again->total_cents, c->total_cents);
    ord_it_assert_counts(ord_it_counts(w->t), after);

    w->items[ITEMS - 1].quantity++; /* another request under the same key */
    it_order_create(w->t->ord_ch, CUSTOMER, w->items, ITEMS, key, 0, &other, &res);
    w->items[ITEMS - 1].quantity--;
    IT_ASSERT_ERROR(res, SVC_EEXIST, "idempotency key reused with a different request");
    assert_null(other);
    ord_it_assert_counts(ord_it_counts(w->t), after);
    the_event_is_the_order_byte_for_byte(w, c->id);
    it_free(c);
    it_free(again);
}

/* Waits up to ms for a notification on channel outbox; true if one came. */
static bool notified(PGconn *pg, int ms)
{
    uint64_t end = svc_now_ns() + (uint64_t)ms * SVC_NS_PER_MS;
    PGnotify *n = NULL;

    while (n == NULL && svc_now_ns() < end) {
        struct pollfd p = {.fd = PQsocket(pg), .events = POLLIN};
        (void)poll(&p, 1, 20);
        assert_int_equal(PQconsumeInput(pg), 1);
        n = PQnotifies(pg);
    }
    if (n != NULL)
        assert_string_equal(n->relname, "outbox");
    PQfreemem(n);
    return n != NULL;
}

static void an_order_notifies_the_relays_and_a_replay_does_not(void **state)
{
    world_t *w = *state;
    PGconn *pg = PQconnectdb(w->t->ord_db.dsn);
    char key[64], uuid[37];
    it_created_t *c = NULL, *again = NULL;

    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    PQclear(PQexec(pg, "LISTEN outbox"));
    it_random_uuid(uuid);
    snprintf(key, sizeof key, "notify-it-%s", uuid);
    create(w, key, &c);
    assert_true(notified(pg, it_ms(5000)));
    create(w, key, &again);
    assert_string_equal(again->id, c->id);
    assert_false(notified(pg, 300));
    PQfinish(pg);
    it_free(c);
    it_free(again);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_lines_are_written_and_read_back_exactly),
        cmocka_unit_test(replay_is_exact_and_another_body_is_refused),
        cmocka_unit_test(an_order_notifies_the_relays_and_a_replay_does_not),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests_name("order_write", tests, setup, teardown);
    cat_it_global_fini();
    return rc;
}
