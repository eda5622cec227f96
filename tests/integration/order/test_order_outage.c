/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The order service while its catalog is down or frozen: pricing fails
 * before any write (no order, item, outbox row or key), the retries and the
 * breaker show in the order's log, an open breaker answers in milliseconds
 * without touching the network, an idempotent replay still works, and the
 * service heals by itself once the catalog is back on the same port. A
 * frozen catalog (SIGSTOP) ends the call at the caller's deadline.
 *
 * Each test gets a fresh catalog and order service: breaker state must not
 * leak from one test into the next.
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

#define GET         "/shopmicro.catalog.v1.CatalogService/BatchGetProducts"
#define COOLDOWN_MS 1500
#define OPENED      "breaker catalog: closed -> open after 5 consecutive failures"

static int setup(void **state)
{
    /* debug: the resilience layer then also logs each breaker rejection */
    static const char *const env[] = {"ORDER_CATALOG_BREAKER_COOLDOWN_MS=1500",
                                      "ORDER_LOG_LEVEL=debug", NULL};

    return ord_it_setup(state, NULL, env);
}

static void catalog_down_fails_before_writing_opens_breaker_and_heals(void **state)
{
    ord_it_t *t = *state;
    char a[37], key[64], uuid[37];
    it_item_t items[1] = {{a, 2}};
    it_created_t *first = NULL, *c = NULL;
    ord_it_counts_t before;
    rpc_result_t res;
    size_t retries;
    uint64_t t0, opened;
    double ms, worst = 0;
    int tries = 0;

    ord_it_product(t, "Kettle", 2599, a);
    it_random_uuid(uuid);
    snprintf(key, sizeof key, "outage-%s", uuid);
    it_order_create(t->ord_ch, "cust-o", items, 1, key, 0, &first, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    before = ord_it_counts(t);

    ord_it_catalog_kill(t);
    /* Failures 1-4: each BatchGetProducts is retried, then the call is UNAVAILABLE;
     * the breaker is not open yet. */
    for (int i = 1; i <= 4; i++) {
        t0 = svc_now_ns();
        it_order_create(t->ord_ch, "cust-o", items, 1, NULL, 5000, &c, &res);
        IT_ASSERT_ERROR(res, SVC_EUNAVAIL, "catalog unavailable");
        fprintf(stderr, "failed call %d: %.1f ms: %s\n", i, ord_it_ms_since(t0), res.message);
        assert_null(strstr(res.message, "attempts=0"));
        if (spawn_log_contains(t->ord, OPENED))
            fail_msg("the breaker opened after only %d failed calls", i);
    }
    assert_true(spawn_log_contains(t->ord, GET " failed (attempt 1/3), retrying in"));
    assert_true(spawn_log_contains(t->ord, GET " failed (attempt 2/3), retrying in"));
    it_order_create(t->ord_ch, "cust-o", items, 1, NULL, 5000, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EUNAVAIL, "catalog unavailable");
    opened = svc_now_ns();
    if (!spawn_log_contains(t->ord, OPENED)) {
        spawn_log_dump(t->ord, 40);
        fail_msg("no \"%s\" after 5 failed calls", OPENED);
    }
    ord_it_assert_counts(ord_it_counts(t), before);

    /* Open: answered at once, no attempt (no new retry line, no connection). */
    retries = spawn_log_count(t->ord, "retrying in");
    for (int i = 0; i < 5; i++) {
        t0 = svc_now_ns();
        it_order_create(t->ord_ch, "cust-o", items, 1, NULL, 5000, &c, &res);
        ms = ord_it_ms_since(t0);
        worst = ms > worst ? ms : worst;
        IT_ASSERT_ERROR(res, SVC_EUNAVAIL, "circuit open");
        IT_ASSERT_ERROR(res, SVC_EUNAVAIL, "reason=breaker-open attempts=0");
    }
    fprintf(stderr, "breaker open: slowest of 5 CreateOrders %.3f ms\n", worst);
    if (worst >= it_ms(10))
        fail_msg("an open breaker took %.3f ms to answer (limit %d ms)", worst, it_ms(10));
    assert_int_equal(spawn_log_count(t->ord, "retrying in"), retries);
    assert_true(spawn_log_contains(t->ord, GET " rejected (breaker-open): circuit open"));

    /* A replay needs only the database: it works with the catalog gone. */
    it_order_create(t->ord_ch, "cust-o", items, 1, key, 0, &c, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_string_equal(c->id, first->id);
    assert_int_equal(c->total_cents, 2 * 2599);
    it_free(c);
    ord_it_assert_counts(ord_it_counts(t), before);

    /* Back on the same port; after the cooldown one trial goes through and
     * orders succeed again, without restarting the order service. */
    assert_int_equal(ord_it_catalog_start(t), SVC_OK);
    do {
        if (tries++ > 0)
            ord_it_sleep_ms(100);
        it_order_create(t->ord_ch, "cust-o", items, 1, NULL, 3000, &c, &res);
    } while (res.err == SVC_EUNAVAIL && ord_it_ms_since(opened) < COOLDOWN_MS + it_ms(5000));
    IT_ASSERT_CODE(res, SVC_OK);
    ms = ord_it_ms_since(opened);
    fprintf(stderr, "healed %.0f ms after the breaker opened (%d tries)\n", ms, tries);
    assert_true(ms >= COOLDOWN_MS);
    assert_true(spawn_log_contains(t->ord, "breaker catalog: open -> half-open after 1500ms"));
    assert_true(spawn_log_contains(t->ord, "breaker catalog: half-open -> closed"));
    assert_int_equal(c->total_cents, 2 * 2599);
    it_free(c);
    ord_it_assert_counts(ord_it_counts(t), (ord_it_counts_t){before.orders + 1, before.items + 1,
                                                             before.outbox + 1, before.keys});
    it_free(first);
}

static void frozen_catalog_ends_at_the_callers_deadline(void **state)
{
    ord_it_t *t = *state;
    char a[37];
    it_item_t items[1] = {{a, 1}};
    it_created_t *c = NULL;
    ord_it_counts_t before;
    rpc_result_t res;
    uint64_t t0;
    double ms;

    ord_it_product(t, "Clock", 1000, a);
    before = ord_it_counts(t);
    assert_int_equal(spawn_signal(t->cat, SIGSTOP), SVC_OK);
    t0 = svc_now_ns();
    it_order_create(t->ord_ch, "cust-f", items, 1, NULL, 1000, &c, &res);
    ms = ord_it_ms_since(t0);
    fprintf(stderr, "frozen catalog: DEADLINE_EXCEEDED after %.1f ms\n", ms);
    IT_ASSERT_CODE(res, SVC_ETIMEDOUT);
    if (ms < 950 || ms > 1000 + it_ms(250))
        fail_msg("answered after %.1f ms, want about the 1000 ms deadline", ms);
    /* The order service gives up at the same deadline; once it has said so
     * (its access line), nothing may have been written. */
    assert_int_equal(spawn_log_wait(t->ord, "CreateOrder DEADLINE_EXCEEDED", it_ms(3000)), SVC_OK);
    ord_it_assert_counts(ord_it_counts(t), before);
    /* The caller's own deadline is not the catalog's failure. */
    assert_false(spawn_log_contains(t->ord, "breaker catalog: closed -> open"));

    assert_int_equal(spawn_signal(t->cat, SIGCONT), SVC_OK);
    it_order_create(t->ord_ch, "cust-f", items, 1, NULL, 5000, &c, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    it_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(catalog_down_fails_before_writing_opens_breaker_and_heals,
                                        setup, ord_it_teardown),
        cmocka_unit_test_setup_teardown(frozen_catalog_ends_at_the_callers_deadline, setup,
                                        ord_it_teardown),
    };
    int rc;

    cat_it_global_init();
    rc = cmocka_run_group_tests_name("order_outage", tests, NULL, NULL);
    cat_it_global_fini();
    return rc;
}
