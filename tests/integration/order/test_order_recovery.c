/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Recovery after a catalog outage, for orders of every shape: the catalog is
 * killed (or frozen) until order's breaker for it opens, then comes back,
 * and four clients keep placing orders of 2, 10 and 100 distinct products
 * every 200 ms (no single-item order among them, which would hide the trap
 * below). Each client must see its first success within the cooldown plus a
 * second, and none may fail after that. And for each shape, 1 item
 * included: the first order placed after the cooldown succeeds (the order's
 * one pricing call is the breaker's trial).
 *
 * The trap this guards: an order used to price its lines with one
 * GetProduct each, all at once. In half-open the first line's call was the
 * breaker's trial and the second was rejected, so the order failed and
 * cancelled its other calls; had that cancel killed the trial, the breaker
 * would have handed the permit to the next order, which would do the same,
 * and multi-line orders would never recover (seen for 40+ s with a 10 s
 * cooldown). An order is one BatchGetProducts call now, so that cannot
 * happen by construction; the test keeps every shape honest.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "order_it.h"

#define COOLDOWN_MS 1500
#define CLIENTS     4
#define PERIOD_MS   200
#define PRODUCTS    100
#define CALL_MS     it_ms(2000) /* each order's deadline */
#define OPEN_TEXT   "circuit open"

static const size_t multi[] = {2, 10, 100};
static const size_t every_shape[] = {1, 2, 10, 100};

typedef struct world {
    ord_it_t *t;
    char ids[PRODUCTS][37];
    uint64_t back_ns;     /* the catalog is back */
    uint64_t until_ns;    /* clients stop sending */
    const size_t *shapes; /* each client cycles through these, from its own start */
    size_t n_shapes;
} world_t;

typedef struct client {
    world_t *w;
    int k;
    int sent, ok, failed_after_ok;
    double first_ok_ms; /* since back_ns; -1: never */
    char last_error[SVC_ERRBUF_LEN + 32];
} client_t;

static int setup(void **state)
{
    /* Short attempts and backoffs, so a frozen catalog trips the breaker in
     * a few seconds; the breaker needs 5 failures as in production. The
     * attempt timeout still leaves a loaded (sanitizer) catalog time to
     * answer 400 pricing calls at once: a recovered catalog must not look
     * slow enough to trip the breaker again. */
    static char attempt[64];
    const char *const env[] = {"ORDER_CATALOG_BREAKER_COOLDOWN_MS=1500", attempt,
                               "ORDER_CATALOG_BACKOFF_BASE_MS=10",
                               "ORDER_CATALOG_BACKOFF_CAP_MS=20", NULL};

    snprintf(attempt, sizeof attempt, "ORDER_CATALOG_ATTEMPT_TIMEOUT_MS=%d", it_ms(500));
    return ord_it_setup(state, NULL, env);
}

static void make_products(world_t *w)
{
    for (int i = 0; i < PRODUCTS; i++) {
        char name[32];
        snprintf(name, sizeof name, "Part %d", i);
        ord_it_product(w->t, name, 100 + i, w->ids[i]);
    }
}

/* An order of n distinct products, starting at product `first`. */
static svc_err_t place(world_t *w, size_t n, size_t first, rpc_result_t *res)
{
    it_item_t items[PRODUCTS];
    it_created_t *c = NULL;

    for (size_t i = 0; i < n; i++)
        items[i] = (it_item_t){w->ids[(first + i) % PRODUCTS], 1};
    it_order_create(w->t->ord_ch, "cust-r", items, n, NULL, CALL_MS, &c, res);
    it_free(c);
    return res->err;
}

/* Sends 2-item orders until one is refused by the open breaker. */
static void trip_breaker(world_t *w)
{
    rpc_result_t res;

    for (int i = 0; i < 30; i++) {
        if (place(w, 2, 0, &res) == SVC_EUNAVAIL && strstr(res.message, OPEN_TEXT) != NULL)
            return;
        assert_int_not_equal(res.err, SVC_OK);
    }
    fail_msg("the breaker did not open after 30 two-item orders: %s", res.message);
}

static void *client_main(void *arg)
{
    client_t *c = arg;
    world_t *w = c->w;
    uint64_t next = svc_now_ns();

    for (int i = 0; svc_now_ns() < w->until_ns; i++) {
        size_t n = w->shapes[(size_t)(c->k + i) % w->n_shapes];
        rpc_result_t res;

        c->sent++;
        if (place(w, n, (size_t)c->k * 7 + (size_t)i, &res) == SVC_OK) {
            if (c->ok++ == 0)
                c->first_ok_ms = (double)(svc_now_ns() - w->back_ns) / 1e6;
        } else {
            if (c->ok > 0)
                c->failed_after_ok++;
            snprintf(c->last_error, sizeof c->last_error, "%zu items: %s", n, res.message);
        }
        next += (uint64_t)PERIOD_MS * SVC_NS_PER_MS;
        while (svc_now_ns() < next)
            ord_it_sleep_ms(5);
    }
    return NULL;
}

/* n clients from the moment the catalog is back; then the verdict. */
static void clients_recover(world_t *w, int n, const char *what)
{
    double limit = COOLDOWN_MS + it_ms(1000);
    client_t c[CLIENTS];
    pthread_t th[CLIENTS];

    w->until_ns = w->back_ns + (uint64_t)(limit + 1500) * SVC_NS_PER_MS;
    for (int k = 0; k < n; k++) {
        c[k] = (client_t){w, k, 0, 0, 0, -1, ""};
        assert_int_equal(pthread_create(&th[k], NULL, client_main, &c[k]), 0);
    }
    for (int k = 0; k < n; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < n; k++) {
        fprintf(stderr,
                "%s: client %d: %d sent, %d ok, first ok after %.0f ms, %d failed after it%s%s\n",
                what, k, c[k].sent, c[k].ok, c[k].first_ok_ms, c[k].failed_after_ok,
                c[k].last_error[0] != '\0' ? "; last error: " : "", c[k].last_error);
        if (c[k].ok == 0 || c[k].first_ok_ms > limit)
            fail_msg("%s: client %d: no success within %.0f ms of the catalog's return (%s)", what,
                     k, limit, c[k].last_error);
        assert_int_equal(c[k].failed_after_ok, 0);
    }
}

/* Kills the catalog, trips the breaker with 2-item orders, restarts it. */
static void outage(world_t *w)
{
    ord_it_catalog_kill(w->t);
    trip_breaker(w);
    assert_int_equal(ord_it_catalog_start(w->t), SVC_OK);
    w->back_ns = svc_now_ns();
}

static void killed_catalog_multi_item_orders_recover(void **state)
{
    world_t w = {.t = *state, .shapes = multi, .n_shapes = SVC_COUNTOF(multi)};

    make_products(&w);
    outage(&w);
    clients_recover(&w, CLIENTS, "killed");
    assert_true(spawn_log_contains(w.t->ord, "breaker catalog: half-open -> closed"));
}

static void frozen_catalog_multi_item_orders_recover(void **state)
{
    world_t w = {.t = *state, .shapes = multi, .n_shapes = SVC_COUNTOF(multi)};

    make_products(&w);
    assert_int_equal(spawn_signal(w.t->cat, SIGSTOP), SVC_OK);
    trip_breaker(&w);
    assert_int_equal(spawn_signal(w.t->cat, SIGCONT), SVC_OK);
    w.back_ns = svc_now_ns();
    clients_recover(&w, CLIENTS, "frozen");
    assert_true(spawn_log_contains(w.t->ord, "breaker catalog: half-open -> closed"));
}

static void every_shape_heals_with_the_first_order_after_the_cooldown(void **state)
{
    world_t w = {.t = *state};
    rpc_result_t res;

    make_products(&w);
    for (size_t i = 0; i < SVC_COUNTOF(every_shape); i++) {
        uint64_t opened, t0;

        outage(&w);
        opened = w.back_ns; /* the breaker opened just before the restart */
        while (svc_now_ns() < opened + (uint64_t)(COOLDOWN_MS + 300) * SVC_NS_PER_MS)
            ord_it_sleep_ms(10);
        t0 = svc_now_ns();
        if (place(&w, every_shape[i], i, &res) != SVC_OK)
            fail_msg("%zu items: the first order after the cooldown failed: %s", every_shape[i],
                     res.message);
        fprintf(stderr, "%zu items: first order after the cooldown: OK in %.1f ms\n",
                every_shape[i], ord_it_ms_since(t0));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(killed_catalog_multi_item_orders_recover, setup,
                                        ord_it_teardown),
        cmocka_unit_test_setup_teardown(frozen_catalog_multi_item_orders_recover, setup,
                                        ord_it_teardown),
        cmocka_unit_test_setup_teardown(every_shape_heals_with_the_first_order_after_the_cooldown,
                                        setup, ord_it_teardown),
    };
    int rc;

    cat_it_global_init();
    rc = cmocka_run_group_tests_name("order_recovery", tests, NULL, NULL);
    cat_it_global_fini();
    return rc;
}
