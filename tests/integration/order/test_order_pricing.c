/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How the order service asks the catalog for prices, seen from a fake
 * catalog in this process that answers GetProduct slowly and counts the
 * calls it holds at once: an order's distinct products are all priced at
 * the same time (one round trip, not one per item), each product once, and
 * the first failure cancels the rest instead of waiting for them.
 *
 * The fake runs on pkg/rpc with one pending call per worker, so it really
 * serves concurrent calls concurrently (see docs/order.md, "Concurrency").
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "order_it.h"

#define FAKE_WORKERS 16
#define SLOW_MS      300

typedef struct fake {
    rpc_server_t *srv;
    pthread_t thread;
    char addr[32];
    atomic_int in_flight, max_in_flight, calls;
    atomic_int delay_ms;
} fake_t;

static fake_t fake;

/* GetProduct: "missing-*" is NOT_FOUND at once; any other id costs 100
 * cents plus its trailing number, after delay_ms. */
static svc_err_t fake_get(rpc_ctx_t *ctx, const ProtobufCMessage *in, ProtobufCMessage **out,
                          char *errbuf)
{
    const Shopmicro__Catalog__V1__GetProductRequest *req =
        (const Shopmicro__Catalog__V1__GetProductRequest *)in;
    Shopmicro__Catalog__V1__Product *p;
    const char *dash = strrchr(req->id, '-');
    int now, max;

    atomic_fetch_add(&fake.calls, 1);
    if (strncmp(req->id, "missing", 7) == 0) {
        svc_errbuf_set(errbuf, "product not found");
        return SVC_ENOTFOUND;
    }
    now = atomic_fetch_add(&fake.in_flight, 1) + 1;
    max = atomic_load(&fake.max_in_flight);
    while (now > max && !atomic_compare_exchange_weak(&fake.max_in_flight, &max, now))
        ;
    ord_it_sleep_ms(atomic_load(&fake.delay_ms));
    atomic_fetch_sub(&fake.in_flight, 1);
    p = rpc_ctx_alloc(ctx, sizeof *p);
    if (p == NULL)
        return SVC_ENOMEM;
    shopmicro__catalog__v1__product__init(p);
    p->id = rpc_ctx_strdup(ctx, req->id);
    p->name = (char *)"fake";
    p->price_cents = 100 + (dash != NULL ? strtol(dash + 1, NULL, 10) : 0);
    *out = &p->base;
    return SVC_OK;
}

static const rpc_method_t fake_methods[] = {
    {"/shopmicro.catalog.v1.CatalogService/GetProduct",
     &shopmicro__catalog__v1__get_product_request__descriptor, fake_get},
};

static void *fake_main(void *arg)
{
    (void)arg;
    if (rpc_server_run(fake.srv, NULL) != SVC_OK)
        fprintf(stderr, "fake catalog: did not stop cleanly\n");
    return NULL;
}

static int setup(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    rpc_server_opts_t o;

    atomic_store(&fake.delay_ms, SLOW_MS);
    rpc_server_opts_init(&o);
    o.listen = "127.0.0.1:0";
    o.workers = FAKE_WORKERS;
    o.log_module = "fake-catalog";
    if (rpc_server_new(&o, fake_methods, SVC_COUNTOF(fake_methods), &fake.srv, errbuf) != SVC_OK ||
        pthread_create(&fake.thread, NULL, fake_main, NULL) != 0) {
        fprintf(stderr, "fake catalog: %s\n", errbuf);
        return -1;
    }
    snprintf(fake.addr, sizeof fake.addr, "127.0.0.1:%d", rpc_server_port(fake.srv));
    return ord_it_setup(state, fake.addr, NULL);
}

static int teardown(void **state)
{
    int rc = ord_it_teardown(state);

    rpc_server_stop(fake.srv);
    pthread_join(fake.thread, NULL);
    rpc_server_free(fake.srv);
    fake.srv = NULL;
    return rc;
}

static void reset_counters(void)
{
    atomic_store(&fake.calls, 0);
    atomic_store(&fake.max_in_flight, 0);
}

static void distinct_products_are_priced_at_once_and_once_each(void **state)
{
    enum { N = 10 };
    ord_it_t *t = *state;
    char ids[N][24];
    it_item_t items[N + 2];
    it_created_t *c = NULL;
    rpc_result_t res;
    int64_t want = 0;
    uint64_t t0;
    double ms;

    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "part-%d", i);
        items[i] = (it_item_t){ids[i], 2};
        want += 2 * (100 + i);
    }
    items[N] = (it_item_t){ids[3], 1}; /* repeated products are priced once */
    items[N + 1] = (it_item_t){ids[7], 1};
    want += 103 + 107;
    reset_counters();
    t0 = svc_now_ns();
    it_order_create(t->ord_ch, "cust-p", items, N + 2, NULL, 10000, &c, &res);
    ms = ord_it_ms_since(t0);
    IT_ASSERT_CODE(res, SVC_OK);
    fprintf(stderr, "%d products at %d ms each: priced in %.0f ms, at most %d at once\n", N,
            SLOW_MS, ms, atomic_load(&fake.max_in_flight));
    assert_int_equal(c->total_cents, want);
    assert_int_equal(atomic_load(&fake.calls), N);
    assert_int_equal(atomic_load(&fake.max_in_flight), N);
    /* One round trip: one after another would take N x SLOW_MS. */
    if (ms >= SLOW_MS + it_ms(SLOW_MS))
        fail_msg("pricing %d products took %.0f ms", N, ms);
    it_free(c);
}

static void first_failure_cancels_the_other_calls(void **state)
{
    ord_it_t *t = *state;
    it_item_t items[4] = {{"slow-1", 1}, {"slow-2", 1}, {"missing-9", 1}, {"slow-3", 1}};
    ord_it_counts_t before = ord_it_counts(t);
    it_created_t *c = NULL;
    rpc_result_t res;
    uint64_t t0;
    double ms;

    atomic_store(&fake.delay_ms, 2000);
    t0 = svc_now_ns();
    it_order_create(t->ord_ch, "cust-p", items, 4, NULL, 10000, &c, &res);
    ms = ord_it_ms_since(t0);
    atomic_store(&fake.delay_ms, SLOW_MS);
    fprintf(stderr, "unknown product answered after %.0f ms\n", ms);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "unknown product missing-9");
    if (ms >= it_ms(1000))
        fail_msg("the order waited %.0f ms for calls it no longer needed", ms);
    ord_it_assert_counts(ord_it_counts(t), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(distinct_products_are_priced_at_once_and_once_each),
        cmocka_unit_test(first_failure_cancels_the_other_calls),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests_name("order_pricing", tests, setup, teardown);
    cat_it_global_fini();
    return rc;
}
