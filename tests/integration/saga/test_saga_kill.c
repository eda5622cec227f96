/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_saga_kill.c - how soon the saga's consumers get going again after a
 * kill -9, with the services' own consumer settings (no session timeout is
 * set here: the defaults are what is tested).
 *
 *   restarted_consumers_resume_within_5s: catalog and order (each the one
 *     member of its group) are kill -9'd and started again at once; the
 *     orders placed then are decided by catalog and CONFIRMED by order
 *     within 5 s of the restart: a restarted member takes its partitions
 *     back at once, it does not wait for the dead one's session to expire.
 *   survivor_takes_dead_members_partitions_within_10s: two catalog replicas
 *     share the group; the second is kill -9'd and stays dead. Orders placed
 *     right after the kill, on whichever partition, are decided within 10 s
 *     of it: the survivor takes the dead member's partitions. Then the dead
 *     one comes back (the same instance id) and gets a share again.
 *   clean_stop_hands_over_within_3s: the second replica is stopped with
 *     SIGTERM: the survivor owns every partition within 3 s (a clean stop
 *     leaves the group, it does not wait for its session to expire).
 *   every_order_decided_once: after all of it, each order was decided once
 *     (one stock decision, one StockReserved, one final order event; each
 *     event processed once on each side), and the stock adds up.
 *
 * Each figure is printed ("kill: ..."), so a run says how far from its
 * bound it was. The bounds are the goals in a plain build; a sanitizer
 * build's slower processes stretch them as every wait (it_ms).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "saga_it.h"

#define N_PRODUCTS 4
#define STOCK      1000 /* every order is CONFIRMED: a stall, not stock, is measured */
#define N_BATCH                                                                                    \
    12 /* orders per measurement: with 3 partitions, the chance that
          none lands on a given one is (2/3)^12, under 1 % */
#define MAX_ORDERS 64
#define PARTITIONS 3 /* shopmicro.orders.v1 and shopmicro.inventory.v1 (kafka.sh) */

enum { P_CATALOG, P_CATALOG2, P_ORDER, P_RELAY, P_RELAY_CAT, N_PROCS };

static saga_world_t w;
static saga_proc_t procs[N_PROCS];
static char cat_addr[32], cat2_addr[32], ord_addr[32];
static int cat_admin, cat2_admin, ord_admin;
static char products[N_PRODUCTS][37];
static grpc_channel *ord_ch;
static char placed[MAX_ORDERS][37];
static int n_placed;
static int64_t placed_units;

static void catalog_proc(saga_proc_t *c, const char *name, const char *addr, int admin)
{
    char v[64];

    saga_catalog_proc(c, name, addr, &w);
    snprintf(v, sizeof v, "127.0.0.1:%d", admin);
    saga_env_add(c, "CATALOG_ADMIN_LISTEN", v);
    /* One id per replica, kept across its restarts (deploy/local/services.sh
     * names them so too). */
    saga_env_add(c, "CATALOG_CONSUMER_INSTANCE_ID", name);
}

static int setup(void **state)
{
    char v[64];
    saga_proc_t *o = &procs[P_ORDER];

    (void)state;
    if (saga_world_up(&w, "saga_kill") != 0)
        return -1;
    snprintf(cat_addr, sizeof cat_addr, "127.0.0.1:%d", spawn_free_port());
    snprintf(cat2_addr, sizeof cat2_addr, "127.0.0.1:%d", spawn_free_port());
    snprintf(ord_addr, sizeof ord_addr, "127.0.0.1:%d", spawn_free_port());
    cat_admin = spawn_free_port();
    cat2_admin = spawn_free_port();
    ord_admin = spawn_free_port();
    catalog_proc(&procs[P_CATALOG], "catalog", cat_addr, cat_admin);
    catalog_proc(&procs[P_CATALOG2], "catalog-2", cat2_addr, cat2_admin);
    /* Priced by the first replica only: the second is the one killed for
     * good. */
    saga_order_proc(o, ord_addr, cat_addr, &w);
    snprintf(v, sizeof v, "127.0.0.1:%d", ord_admin);
    saga_env_add(o, "ORDER_ADMIN_LISTEN", v);
    saga_env_add(o, "ORDER_CONSUMER_INSTANCE_ID", "order");
    saga_relay_proc(&procs[P_RELAY], "relay", w.ord_db.dsn, w.kafka.brokers);
    saga_relay_proc(&procs[P_RELAY_CAT], "relay-catalog", w.cat_db.dsn, w.kafka.brokers);
    for (int i = 0; i < N_PROCS; i++)
        if (i != P_CATALOG2 && saga_proc_start(&procs[i], "kill") != SVC_OK)
            return -1;
    ord_ch = rpc_channel_new(ord_addr, NULL);
    {
        grpc_channel *cat_ch = rpc_channel_new(cat_addr, NULL);
        for (int i = 0; i < N_PRODUCTS; i++) {
            it_product_t *p = NULL;
            rpc_result_t res;
            if (it_create(cat_ch, "kill", "", 100, STOCK, 0, &p, &res) != SVC_OK)
                return -1;
            snprintf(products[i], 37, "%s", p->id);
            it_free(p);
        }
        grpc_channel_destroy(cat_ch);
    }
    return 0;
}

static int teardown(void **state)
{
    int rc;

    (void)state;
    if (ord_ch != NULL)
        grpc_channel_destroy(ord_ch);
    rc = saga_procs_stop(procs, N_PROCS);
    saga_world_down(&w);
    return rc;
}

/* The partitions a service's consumer holds now (its admin port's
 * *_assigned_partitions); -1 when the page cannot be read. */
static int assigned(int admin_port, const char *metric)
{
    size_t cap = 512 * 1024;
    char *page = malloc(cap);
    double v = -1;

    assert_non_null(page);
    if (rly_it_http_get(admin_port, "/metrics", page, cap) == 200)
        v = rly_it_metric(page, metric);
    free(page);
    return (int)v;
}

#define CAT_ASSIGNED "shopmicro_catalog_saga_consumer_assigned_partitions"
#define ORD_ASSIGNED "shopmicro_order_saga_consumer_assigned_partitions"

/* Waits up to ms until the consumer behind admin_port holds `want`
 * partitions (want 0: between 1 and PARTITIONS - 1, a share); the ms it
 * took, or -1. */
static int64_t wait_assigned(int admin_port, const char *metric, int want, int ms)
{
    uint64_t t0 = it_now_ms(), by = t0 + (uint64_t)it_ms(ms);

    for (;;) {
        int n = assigned(admin_port, metric);
        if (want > 0 ? n == want : n > 0 && n < PARTITIONS)
            return (int64_t)(it_now_ms() - t0);
        if (it_now_ms() >= by)
            return -1;
        ord_it_sleep_ms(50);
    }
}

/* Places n orders (1 or 2 units of one product each), each with its own
 * Idempotency-Key, retried until answered (the order service may be just
 * starting); their ids go to placed[]. */
static void place(int n, const char *tag)
{
    for (int i = 0; i < n; i++) {
        char key[64];
        it_item_t item = {products[n_placed % N_PRODUCTS], 1 + n_placed % 2};
        uint64_t give_up = it_now_ms() + (uint64_t)it_ms(20000);

        assert_true(n_placed < MAX_ORDERS);
        snprintf(key, sizeof key, "kill-%s-%d-%d", tag, (int)getpid(), n_placed);
        for (;;) {
            it_created_t *out = NULL;
            rpc_result_t res;

            if (it_order_create(ord_ch, "kill", &item, 1, key, 3000, &out, &res) == SVC_OK) {
                snprintf(placed[n_placed], 37, "%s", out->id);
                it_free(out);
                break;
            }
            assert_true(it_now_ms() < give_up);
            ord_it_sleep_ms(50);
        }
        placed_units += item.quantity;
        n_placed++;
    }
}

/* The last n placed orders: "'id','id',..." for an IN list. */
static void last_ids(int n, char *out, size_t len)
{
    size_t k = 0;

    out[0] = '\0';
    for (int i = n_placed - n; i < n_placed; i++)
        k += (size_t)snprintf(out + k, len - k, "%s'%s'", k ? "," : "", placed[i]);
}

typedef struct decided {
    int64_t cat_ms; /* every one decided by catalog; -1: not in time */
    int64_t ord_ms; /* every one CONFIRMED or CANCELLED by order     */
    int64_t own_ms; /* the admin port's consumer held every partition
                       (when watched); -1: not in time               */
} decided_t;

/* Waits up to bound_ms for the last n placed orders to be decided on both
 * sides, watching (if watch_port > 0) when that consumer holds every
 * partition. Times from t0 (it_now_ms). */
static decided_t wait_decided(int n, uint64_t t0, int bound_ms, int watch_port)
{
    char in[MAX_ORDERS * 40], cat_sql[sizeof in + 128], ord_sql[sizeof in + 128];
    decided_t d = {-1, -1, watch_port > 0 ? -1 : 0};
    uint64_t by = it_now_ms() + (uint64_t)it_ms(bound_ms);

    last_ids(n, in, sizeof in);
    snprintf(cat_sql, sizeof cat_sql,
             "SELECT count(*) FROM stock_decisions WHERE order_id::text IN (%s)", in);
    snprintf(ord_sql, sizeof ord_sql,
             "SELECT count(*) FROM orders WHERE status <> 'PENDING' AND id::text IN (%s)", in);
    while ((d.cat_ms < 0 || d.ord_ms < 0 || d.own_ms < 0) && it_now_ms() < by) {
        int64_t now = (int64_t)(it_now_ms() - t0);
        if (d.cat_ms < 0 && saga_db_int(w.cat_db.dsn, cat_sql) == n)
            d.cat_ms = now;
        if (d.ord_ms < 0 && saga_db_int(w.ord_db.dsn, ord_sql) == n)
            d.ord_ms = now;
        if (d.own_ms < 0 && assigned(watch_port, CAT_ASSIGNED) == PARTITIONS)
            d.own_ms = now;
        ord_it_sleep_ms(25);
    }
    return d;
}

/* One order through the whole saga, and order's consumer holding every
 * partition: the groups are settled before anything is killed. */
static void settle(void)
{
    decided_t d;

    place(1, "settle");
    d = wait_decided(1, it_now_ms(), 60000, 0);
    assert_true(d.cat_ms >= 0 && d.ord_ms >= 0);
    assert_true(wait_assigned(ord_admin, ORD_ASSIGNED, PARTITIONS, 60000) >= 0);
}

static void restarted_consumers_resume_within_5s(void **state)
{
    uint64_t t0;
    int64_t up_ms;
    decided_t d;

    (void)state;
    settle();
    assert_true(wait_assigned(cat_admin, CAT_ASSIGNED, PARTITIONS, 60000) >= 0);
    saga_proc_kill(&procs[P_CATALOG]);
    saga_proc_kill(&procs[P_ORDER]);
    t0 = it_now_ms();
    assert_int_equal(saga_proc_start(&procs[P_CATALOG], "kill"), SVC_OK);
    assert_int_equal(saga_proc_start(&procs[P_ORDER], "kill"), SVC_OK);
    up_ms = (int64_t)(it_now_ms() - t0);
    place(N_BATCH, "restart");
    /* 70 s: long enough to measure a stall of a whole 45 s session. */
    d = wait_decided(N_BATCH, t0, 70000, 0);
    fprintf(stderr,
            "kill: catalog and order kill -9'd and started again (up after %" PRId64 " ms): "
            "%d orders placed then decided by catalog %" PRId64 " ms and by order %" PRId64
            " ms after the restart began (bound %d; -1: not within 70 s)\n",
            up_ms, N_BATCH, d.cat_ms, d.ord_ms, it_ms(5000));
    assert_true(d.cat_ms >= 0 && d.cat_ms <= it_ms(5000));
    assert_true(d.ord_ms >= 0 && d.ord_ms <= it_ms(5000));
}

/* Both replicas hold a share of the partitions. */
static void both_replicas_share(void)
{
    int64_t ms = wait_assigned(cat_admin, CAT_ASSIGNED, 0, 60000);

    if (ms >= 0)
        ms = wait_assigned(cat2_admin, CAT_ASSIGNED, PARTITIONS - assigned(cat_admin, CAT_ASSIGNED),
                           60000);
    fprintf(stderr, "kill: both catalog replicas hold partitions (%d + %d), %" PRId64 " ms\n",
            assigned(cat_admin, CAT_ASSIGNED), assigned(cat2_admin, CAT_ASSIGNED), ms);
    assert_true(ms >= 0);
}

static void survivor_takes_dead_members_partitions_within_10s(void **state)
{
    uint64_t t0;
    decided_t d;

    (void)state;
    assert_int_equal(saga_proc_start(&procs[P_CATALOG2], "kill"), SVC_OK);
    both_replicas_share();
    settle();
    saga_proc_kill(&procs[P_CATALOG2]);
    t0 = it_now_ms();
    place(N_BATCH, "survivor");
    d = wait_decided(N_BATCH, t0, 70000, cat_admin);
    fprintf(stderr,
            "kill: catalog-2 kill -9'd for good: the survivor held all %d partitions %" PRId64
            " ms after the kill; the %d orders placed right after it decided by catalog %" PRId64
            " ms, by order %" PRId64 " ms after it (bound %d; -1: not within 70 s)\n",
            PARTITIONS, d.own_ms, N_BATCH, d.cat_ms, d.ord_ms, it_ms(10000));
    assert_true(d.own_ms >= 0 && d.own_ms <= it_ms(10000));
    assert_true(d.cat_ms >= 0 && d.cat_ms <= it_ms(10000));
    assert_true(d.ord_ms >= 0 && d.ord_ms <= it_ms(10000));

    /* Back as the same member: it gets a share again, and orders flow. */
    assert_int_equal(saga_proc_start(&procs[P_CATALOG2], "kill"), SVC_OK);
    both_replicas_share();
    t0 = it_now_ms();
    place(N_BATCH, "back");
    d = wait_decided(N_BATCH, t0, 30000, 0);
    fprintf(stderr, "kill: catalog-2 back: %d orders decided by order %" PRId64 " ms after\n",
            N_BATCH, d.ord_ms);
    assert_true(d.cat_ms >= 0 && d.ord_ms >= 0);
}

static void clean_stop_hands_over_within_3s(void **state)
{
    uint64_t t0;
    int64_t exit_ms, own_ms;

    (void)state;
    both_replicas_share();
    t0 = it_now_ms();
    assert_int_equal(saga_proc_stop(&procs[P_CATALOG2]), 0);
    exit_ms = (int64_t)(it_now_ms() - t0);
    own_ms = wait_assigned(cat_admin, CAT_ASSIGNED, PARTITIONS, 30000);
    if (own_ms >= 0)
        own_ms += exit_ms;
    fprintf(stderr,
            "kill: catalog-2 stopped with SIGTERM (exited after %" PRId64 " ms): the survivor "
            "held all %d partitions %" PRId64 " ms after the signal (bound %d)\n",
            exit_ms, PARTITIONS, own_ms, it_ms(3000));
    assert_true(own_ms >= 0 && own_ms <= it_ms(3000));
}

static void every_order_decided_once(void **state)
{
    char sql[256];
    int64_t left;

    (void)state;
    assert_int_equal(saga_db_int(w.ord_db.dsn, "SELECT count(*) FROM orders"), n_placed);
    assert_int_equal(
        saga_db_int(w.ord_db.dsn, "SELECT count(*) FROM orders WHERE status <> 'CONFIRMED'"), 0);
    assert_int_equal(saga_db_int(w.cat_db.dsn, "SELECT count(*) FROM stock_decisions WHERE "
                                               "outcome = 'RESERVED'"),
                     n_placed);
    /* One StockReserved per decision, one final event per order. */
    assert_int_equal(saga_db_int(w.cat_db.dsn,
                                 "SELECT count(*) FROM stock_decisions d WHERE (SELECT count(*) "
                                 "FROM outbox x WHERE x.aggregate_id = d.order_id::text) <> 1"),
                     0);
    assert_int_equal(saga_db_int(w.ord_db.dsn,
                                 "SELECT count(*) FROM orders o WHERE (SELECT count(*) FROM "
                                 "outbox x WHERE x.aggregate_id = o.id::text AND x.event_type "
                                 "IN ('OrderConfirmed', 'OrderCancelled')) <> 1"),
                     0);
    /* Each event processed once on each side (OrderCreated by catalog, the
     * stock outcome by order). */
    assert_int_equal(saga_db_int(w.cat_db.dsn, "SELECT count(*) FROM processed_events WHERE "
                                               "event_type LIKE '%OrderCreated'"),
                     n_placed);
    assert_int_equal(saga_db_int(w.ord_db.dsn, "SELECT count(*) FROM processed_events WHERE "
                                               "event_type LIKE '%Stock%'"),
                     n_placed);
    /* The stock went down by exactly the ordered units. */
    snprintf(sql, sizeof sql, "SELECT %d - sum(stock) FROM products", N_PRODUCTS * STOCK);
    left = saga_db_int(w.cat_db.dsn, sql);
    fprintf(stderr,
            "kill: %d orders, each decided once; %" PRId64 " units reserved of %" PRId64
            " ordered\n",
            n_placed, left, placed_units);
    assert_int_equal(left, placed_units);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(restarted_consumers_resume_within_5s),
        cmocka_unit_test(survivor_takes_dead_members_partitions_within_10s),
        cmocka_unit_test(clean_stop_hands_over_within_3s),
        cmocka_unit_test(every_order_decided_once),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests(tests, setup, teardown);
    cat_it_global_fini();
    return rc;
}
