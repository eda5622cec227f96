/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_saga_burst.c - the stock saga under crashes (issue 13): 200 orders
 * over 20 products whose stock covers about half of the demand, placed by 8
 * clients while catalog, order and both relays are kill -9'd in turn at
 * random moments and restarted (on the same ports: the clients and order's
 * catalog client keep their addresses).
 *
 * A client places each order with an Idempotency-Key and retries the same
 * key until it is answered, as a real client would across an outage. When
 * the system is quiet:
 *   - every order is CONFIRMED or CANCELLED, none PENDING, and its final
 *     event (OrderConfirmed / OrderCancelled) is in order's outbox once;
 *   - catalog decided each order once, and agrees with order: RESERVED for
 *     every CONFIRMED order, REJECTED for every CANCELLED one, with exactly
 *     one StockReserved / StockRejected row each;
 *   - for every product, initial stock - the quantities of its CONFIRMED
 *     orders = its stock now, and that is never below 0.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "saga_it.h"

#define N_PRODUCTS 20
#define N_CLIENTS  8
#define N_ORDERS   200
#define STOCK      8 /* 160 units; the orders ask for about 300 */

enum { V_CATALOG, V_ORDER, V_RELAY, V_RELAY_CAT, N_VICTIMS };

static saga_world_t w;
static saga_proc_t procs[N_VICTIMS];
static char cat_addr[32], ord_addr[32];
static char products[N_PRODUCTS][37];
static atomic_int clients_done;
static atomic_int client_retries;

static int setup(void **state)
{
    saga_proc_t *c = &procs[V_CATALOG], *o = &procs[V_ORDER];

    (void)state;
    if (saga_world_up(&w, "saga_burst") != 0)
        return -1;
    snprintf(cat_addr, sizeof cat_addr, "127.0.0.1:%d", spawn_free_port());
    snprintf(ord_addr, sizeof ord_addr, "127.0.0.1:%d", spawn_free_port());
    saga_catalog_proc(c, "catalog", cat_addr, &w);
    saga_env_add(c, "CATALOG_ADMIN_LISTEN=127.0.0.1:0", NULL);
    saga_env_add(c, "CATALOG_WORKERS=8", NULL);
    saga_order_proc(o, ord_addr, cat_addr, &w);
    saga_env_add(o, "ORDER_ADMIN_LISTEN=127.0.0.1:0", NULL);
    saga_relay_proc(&procs[V_RELAY], "relay", w.ord_db.dsn, w.kafka.brokers);
    saga_relay_proc(&procs[V_RELAY_CAT], "relay-catalog", w.cat_db.dsn, w.kafka.brokers);
    for (int i = 0; i < N_VICTIMS; i++)
        if (saga_proc_start(&procs[i], "burst") != SVC_OK)
            return -1;
    return 0;
}

static int teardown(void **state)
{
    int rc;

    (void)state;
    rc = saga_procs_stop(procs, N_VICTIMS);
    saga_world_down(&w);
    return rc;
}

/* ---- clients ---- */

typedef struct client {
    int index;
    grpc_channel *ch;
    unsigned seed;
    int placed;
} client_t;

static void *client_run(void *arg)
{
    client_t *c = arg;
    uint64_t give_up = it_now_ms() + (uint64_t)it_ms(120000);

    for (int i = 0; i < N_ORDERS / N_CLIENTS; i++) {
        char key[64];
        it_item_t items[2];
        size_t n = 1 + (size_t)(rand_r(&c->seed) % 2);
        int k = (int)(rand_r(&c->seed) % N_PRODUCTS);

        items[0] = (it_item_t){products[k], 1 + (int32_t)(rand_r(&c->seed) % 2)};
        items[1] = (it_item_t){
            products[(k + 1 + (int)(rand_r(&c->seed) % (N_PRODUCTS - 1))) % N_PRODUCTS], 1};
        snprintf(key, sizeof key, "burst-%d-%d-%d", (int)getpid(), c->index, i);
        for (;;) { /* the same key until it is answered: placed once */
            it_created_t *out = NULL;
            rpc_result_t res;

            if (it_order_create(c->ch, "burst", items, n, key, 3000, &out, &res) == SVC_OK) {
                it_free(out);
                c->placed++;
                break;
            }
            atomic_fetch_add(&client_retries, 1);
            if (it_now_ms() > give_up) {
                atomic_fetch_add(&clients_done, 1);
                return NULL;
            }
            ord_it_sleep_ms(200);
        }
        ord_it_sleep_ms(300 + (int)(rand_r(&c->seed) % 200));
    }
    atomic_fetch_add(&clients_done, 1);
    return NULL;
}

/* ---- chaos: each victim in turn, at random moments ---- */

/* On the main thread: a child dies with the thread that started it
 * (PR_SET_PDEATHSIG, support/spawn.h), so restarts must come from a thread
 * that outlives them. Until every client is done; false when a restart
 * failed for good. */
static bool chaos_until_clients_done(void)
{
    unsigned seed = 4242;

    for (int turn = 0; atomic_load(&clients_done) < N_CLIENTS; turn++) {
        saga_proc_t *v = &procs[turn % N_VICTIMS];
        uint64_t at = it_now_ms() + 2000 + rand_r(&seed) % 2000;

        while (it_now_ms() < at && atomic_load(&clients_done) < N_CLIENTS)
            ord_it_sleep_ms(50);
        if (atomic_load(&clients_done) == N_CLIENTS)
            break;
        fprintf(stderr, "chaos: kill -9 %s\n", v->name);
        saga_proc_kill(v);
        ord_it_sleep_ms(200 + (int)(rand_r(&seed) % 600));
        for (int tries = 0; saga_proc_start(v, "burst") != SVC_OK; tries++) {
            if (tries == 5)
                return false;
            ord_it_sleep_ms(500);
        }
    }
    return true;
}

static int64_t ord_int(const char *sql)
{
    return saga_db_int(w.ord_db.dsn, sql);
}

static int64_t cat_int(const char *sql)
{
    return saga_db_int(w.cat_db.dsn, sql);
}

/* Order ids of one status, sorted and joined by ',' (to compare the two
 * services' views of the same orders). */
static char *ids(const char *dsn, const char *sql)
{
    char errbuf[SVC_ERRBUF_LEN];
    char *buf = malloc(N_ORDERS * 40 + 8);

    assert_non_null(buf);
    buf[0] = '\0';
    assert_int_equal(pgtest_scalar(dsn, sql, buf, N_ORDERS * 40 + 8, errbuf), SVC_OK);
    return buf;
}

static void every_order_decided_once_and_stock_adds_up(void **state)
{
    grpc_channel *cat_ch = rpc_channel_new(cat_addr, NULL),
                 *ord_ch = rpc_channel_new(ord_addr, NULL);
    pthread_t th[N_CLIENTS];
    client_t cl[N_CLIENTS];
    bool chaos_ok;
    int placed = 0;
    uint64_t t0 = it_now_ms(), quiet_by;
    int64_t pending;

    (void)state;
    for (int i = 0; i < N_PRODUCTS; i++) {
        it_product_t *p = NULL;
        rpc_result_t res;
        assert_int_equal(it_create(cat_ch, "burst", "", 100, STOCK, 0, &p, &res), SVC_OK);
        snprintf(products[i], 37, "%s", p->id);
        it_free(p);
    }
    atomic_store(&clients_done, 0);
    for (int i = 0; i < N_CLIENTS; i++) {
        cl[i] = (client_t){.index = i, .ch = ord_ch, .seed = (unsigned)(i * 31 + 7)};
        assert_int_equal(pthread_create(&th[i], NULL, client_run, &cl[i]), 0);
    }
    chaos_ok = chaos_until_clients_done();
    for (int i = 0; i < N_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        placed += cl[i].placed;
    }
    fprintf(stderr,
            "burst: %d orders placed in %llu ms, %d client retries; kills: catalog %d, "
            "order %d, relay %d, relay-catalog %d\n",
            placed, (unsigned long long)(it_now_ms() - t0), atomic_load(&client_retries),
            procs[V_CATALOG].kills, procs[V_ORDER].kills, procs[V_RELAY].kills,
            procs[V_RELAY_CAT].kills);
    assert_true(chaos_ok);
    assert_int_equal(placed, N_ORDERS);
    for (int i = 0; i < N_VICTIMS; i++)
        assert_true(procs[i].kills >= 1);

    /* Quiet: everything runs; wait until no order is PENDING. */
    quiet_by = it_now_ms() + (uint64_t)it_ms(90000);
    while ((pending = ord_int("SELECT count(*) FROM orders WHERE status = 'PENDING'")) > 0 &&
           it_now_ms() < quiet_by)
        ord_it_sleep_ms(200);
    fprintf(stderr, "burst: quiet %llu ms after the start (%lld PENDING)\n",
            (unsigned long long)(it_now_ms() - t0), (long long)pending);
    assert_int_equal(pending, 0);
    assert_int_equal(ord_int("SELECT count(*) FROM orders"), N_ORDERS);

    /* Each order's final event once; each decision once; the two agree. */
    assert_int_equal(ord_int("SELECT count(*) FROM orders o WHERE (SELECT count(*) FROM outbox x "
                             "WHERE x.aggregate_id = o.id::text AND x.event_type IN "
                             "('OrderConfirmed', 'OrderCancelled')) <> 1"),
                     0);
    assert_int_equal(cat_int("SELECT count(*) FROM stock_decisions"), N_ORDERS);
    assert_int_equal(cat_int("SELECT count(*) FROM stock_decisions d WHERE (SELECT count(*) FROM "
                             "outbox x WHERE x.aggregate_id = d.order_id::text) <> 1"),
                     0);
    {
        const char *q_ord = "SELECT string_agg(id::text, ',' ORDER BY id) FROM orders WHERE "
                            "status = 'CONFIRMED'";
        const char *q_cat = "SELECT string_agg(order_id::text, ',' ORDER BY order_id) FROM "
                            "stock_decisions WHERE outcome = 'RESERVED'";
        char *a = ids(w.ord_db.dsn, q_ord), *b = ids(w.cat_db.dsn, q_cat);
        assert_string_equal(a, b);
        free(a);
        free(b);
    }

    /* Stock: initial - confirmed quantities = now, never below 0. */
    for (int i = 0; i < N_PRODUCTS; i++) {
        char sql[256];
        int64_t confirmed, now;

        snprintf(sql, sizeof sql,
                 "SELECT COALESCE(sum(i.quantity), 0) FROM order_items i JOIN orders o ON "
                 "o.id = i.order_id WHERE o.status = 'CONFIRMED' AND i.product_id = '%.36s'",
                 products[i]);
        confirmed = ord_int(sql);
        snprintf(sql, sizeof sql, "SELECT stock FROM products WHERE id = '%.36s'", products[i]);
        now = cat_int(sql);
        assert_true(now >= 0);
        assert_int_equal(STOCK - confirmed, now);
    }
    fprintf(stderr, "burst: %lld CONFIRMED, %lld CANCELLED; stock left %lld of %d\n",
            (long long)ord_int("SELECT count(*) FROM orders WHERE status = 'CONFIRMED'"),
            (long long)ord_int("SELECT count(*) FROM orders WHERE status = 'CANCELLED'"),
            (long long)cat_int("SELECT sum(stock) FROM products"), N_PRODUCTS * STOCK);
    assert_true(ord_int("SELECT count(*) FROM orders WHERE status = 'CANCELLED'") > 0);
    grpc_channel_destroy(cat_ch);
    grpc_channel_destroy(ord_ch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_order_decided_once_and_stock_adds_up),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests(tests, setup, teardown);
    cat_it_global_fini();
    return rc;
}
