/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two catalog replicas behind one order service (ORDER_CATALOG_ADDR
 * "ipv4:A,B": pkg/rpc's round robin with health-checked addresses):
 *
 *  - the pricing calls (BatchGetProducts) of a run of orders reach both
 *    replicas;
 *  - kill -9 of one replica while orders keep coming: no order fails and
 *    none takes past its deadline (the calls that were on the dead replica
 *    are retried by pkg/resilience, round robin sends them to the live one),
 *    and every order that was answered is in the database exactly once with
 *    its two lines;
 *  - the dead replica restarted on its port gets calls again.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "order_it.h"

#define GET_OK      "/shopmicro.catalog.v1.CatalogService/BatchGetProducts OK"
#define DEADLINE_MS 3000

static int setup(void **state)
{
    return ord_it_setup_replicas(state, NULL);
}

/* One order of two lines; returns its time in ms, or fails the test. */
static double order_two(ord_it_t *t, it_item_t items[2], int *ok)
{
    it_created_t *c = NULL;
    rpc_result_t res;
    uint64_t t0 = svc_now_ns();
    double ms;

    it_order_create(t->ord_ch, "cust-replicas", items, 2, NULL, it_ms(DEADLINE_MS), &c, &res);
    ms = ord_it_ms_since(t0);
    if (res.err != SVC_OK)
        fail_msg("an order failed after %.1f ms: %s %s", ms, svc_err_name(res.err), res.message);
    it_free(c);
    (*ok)++;
    return ms;
}

static void calls_reach_both_replicas_and_survive_one_killed(void **state)
{
    ord_it_t *t = *state;
    char a[37], b[37];
    it_item_t items[2] = {{a, 1}, {b, 2}};
    int ok = 0, after_kill = 0;
    double worst = 0, ms;
    uint64_t until;

    ord_it_product(t, "Replica lamp", 1500, a);
    ord_it_product(t, "Replica shade", 700, b);
    for (int i = 0; i < 20; i++)
        order_two(t, items, &ok);
    fprintf(stderr, "20 orders: replica 1 served %zu pricing calls, replica 2 %zu\n",
            spawn_log_count(t->cat, GET_OK), spawn_log_count(t->cat2, GET_OK));
    assert_true(spawn_log_count(t->cat, GET_OK) >= 5);
    assert_true(spawn_log_count(t->cat2, GET_OK) >= 5);

    ord_it_catalog_kill(t); /* replica 1, kill -9, while the next orders come */
    until = svc_now_ns() + 3000 * SVC_NS_PER_MS;
    while (svc_now_ns() < until) {
        ms = order_two(t, items, &after_kill);
        if (ms > worst)
            worst = ms;
    }
    fprintf(stderr, "replica 1 killed: %d orders in 3 s, all OK, the slowest %.1f ms\n", after_kill,
            worst);
    assert_true(after_kill >= 10);
    assert_true(worst < it_ms(DEADLINE_MS));
    ok += after_kill;
    assert_int_equal(ord_it_int(t, "SELECT count(*) FROM orders"), ok);
    assert_int_equal(ord_it_int(t, "SELECT count(*) FROM order_items"), 2 * ok);

    /* Back on its port: round robin uses it again once it is SERVING. */
    assert_int_equal(ord_it_catalog_start(t), SVC_OK);
    until = svc_now_ns() + (uint64_t)it_ms(10000) * SVC_NS_PER_MS;
    while (spawn_log_count(t->cat, GET_OK) < 3 && svc_now_ns() < until)
        order_two(t, items, &ok);
    fprintf(stderr, "replica 1 restarted: it served %zu pricing calls\n",
            spawn_log_count(t->cat, GET_OK));
    assert_true(spawn_log_count(t->cat, GET_OK) >= 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(calls_reach_both_replicas_and_survive_one_killed, setup,
                                        ord_it_teardown),
    };

    int rc;

    cat_it_global_init();
    rc = cmocka_run_group_tests_name("order_replicas", tests, NULL, NULL);
    cat_it_global_fini();
    return rc;
}
