/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How the order service asks the catalog for prices, seen from a fake
 * catalog in this process that answers BatchGetProducts slowly and records
 * what it was asked: an order's distinct products are priced by one call
 * (one round trip, whatever the number of lines), each product once, in the
 * order of the lines; the first unknown product names the order's error; a
 * catalog answer that breaks the contract fails the order without a write.
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

#define FAKE_WORKERS 2
#define SLOW_MS      300

#define MAX_IDS 100

typedef struct fake {
    rpc_server_t *srv;
    pthread_t thread;
    char addr[32];
    atomic_int calls, delay_ms;
    size_t n_ids;          /* of the last call; written by the fake's worker, */
    char ids[MAX_IDS][24]; /* read after the order's answer                   */
} fake_t;

static fake_t fake;

/* BatchGetProducts: "missing-*" is unknown (an empty Product), "neg-*"
 * costs -1, "short-*" first makes the answer one product short, "refuse-*"
 * first makes the call INVALID_ARGUMENT; any other id costs 100 cents plus
 * its trailing number. Every call takes delay_ms. */
static svc_err_t fake_batch(rpc_ctx_t *ctx, const ProtobufCMessage *in, ProtobufCMessage **out,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    const Shopmicro__Catalog__V1__BatchGetProductsRequest *req =
        (const Shopmicro__Catalog__V1__BatchGetProductsRequest *)in;
    Shopmicro__Catalog__V1__BatchGetProductsResponse *r = rpc_ctx_alloc(ctx, sizeof *r);
    size_t n = req->n_ids;

    atomic_fetch_add(&fake.calls, 1);
    fake.n_ids = n;
    for (size_t i = 0; i < n && i < MAX_IDS; i++)
        snprintf(fake.ids[i], sizeof fake.ids[i], "%s", req->ids[i]);
    ord_it_sleep_ms(atomic_load(&fake.delay_ms));
    if (n > 0 && strncmp(req->ids[0], "refuse", 6) == 0) {
        svc_errbuf_set(errbuf, "ids must have 1-100 entries");
        return SVC_EINVAL;
    }
    if (r == NULL)
        return SVC_ENOMEM;
    shopmicro__catalog__v1__batch_get_products_response__init(r);
    if ((r->products = rpc_ctx_alloc(ctx, n * sizeof *r->products)) == NULL)
        return SVC_ENOMEM;
    r->n_products = n > 0 && strncmp(req->ids[0], "short", 5) == 0 ? n - 1 : n;
    for (size_t i = 0; i < r->n_products; i++) {
        Shopmicro__Catalog__V1__Product *p = rpc_ctx_alloc(ctx, sizeof *p);
        const char *dash = strrchr(req->ids[i], '-');

        if (p == NULL)
            return SVC_ENOMEM;
        shopmicro__catalog__v1__product__init(p);
        r->products[i] = p;
        if (strncmp(req->ids[i], "missing", 7) == 0)
            continue;
        p->id = rpc_ctx_strdup(ctx, req->ids[i]);
        p->name = (char *)"fake";
        p->price_cents = strncmp(req->ids[i], "neg", 3) == 0
                             ? -1
                             : 100 + (dash != NULL ? strtol(dash + 1, NULL, 10) : 0);
    }
    *out = &r->base;
    return SVC_OK;
}

static const rpc_method_t fake_methods[] = {
    {"/shopmicro.catalog.v1.CatalogService/BatchGetProducts",
     &shopmicro__catalog__v1__batch_get_products_request__descriptor, fake_batch},
};

static void *fake_main(void *arg)
{
    (void)arg;
    if (rpc_server_run(fake.srv, SVC_ERRBUF_SCRATCH) != SVC_OK)
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

static void distinct_products_are_priced_in_one_call(void **state)
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
    atomic_store(&fake.calls, 0);
    t0 = svc_now_ns();
    it_order_create(t->ord_ch, "cust-p", items, N + 2, NULL, 10000, &c, &res);
    ms = ord_it_ms_since(t0);
    IT_ASSERT_CODE(res, SVC_OK);
    fprintf(stderr, "%d products at %d ms a call: priced in %.0f ms by %d call(s)\n", N, SLOW_MS,
            ms, atomic_load(&fake.calls));
    assert_int_equal(c->total_cents, want);
    assert_int_equal(atomic_load(&fake.calls), 1);
    assert_int_equal(fake.n_ids, N);
    for (int i = 0; i < N; i++)
        assert_string_equal(fake.ids[i], ids[i]);
    if (ms >= SLOW_MS + it_ms(SLOW_MS))
        fail_msg("pricing %d products took %.0f ms", N, ms);
    it_free(c);
}

/* The order's error names its first line the catalog does not know. */
static void an_unknown_product_is_named_and_nothing_written(void **state)
{
    ord_it_t *t = *state;
    it_item_t items[4] = {{"part-1", 1}, {"missing-9", 1}, {"part-2", 1}, {"missing-4", 1}};
    ord_it_counts_t before = ord_it_counts(t);
    it_created_t *c = NULL;
    rpc_result_t res;

    it_order_create(t->ord_ch, "cust-p", items, 4, NULL, 10000, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "unknown product missing-9");
    ord_it_assert_counts(ord_it_counts(t), before);
}

/* A negative price, or not one product per id: the catalog broke the
 * contract, so the order fails as INTERNAL, and writes nothing. */
static void a_wrong_answer_fails_the_order_without_a_write(void **state)
{
    ord_it_t *t = *state;
    it_item_t neg[2] = {{"part-1", 1}, {"neg-2", 1}};
    it_item_t shrt[2] = {{"short-1", 1}, {"part-2", 1}};
    ord_it_counts_t before = ord_it_counts(t);
    it_created_t *c = NULL;
    rpc_result_t res;

    it_order_create(t->ord_ch, "cust-p", neg, 2, NULL, 10000, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINTERNAL, "catalog returned price -1 for product neg-2");
    it_order_create(t->ord_ch, "cust-p", shrt, 2, NULL, 10000, &c, &res);
    IT_ASSERT_ERROR(res, SVC_EINTERNAL, "catalog answered 1 products for 2 ids");
    ord_it_assert_counts(ord_it_counts(t), before);
}

/* A catalog that refuses the call (here INVALID_ARGUMENT; UNIMPLEMENTED
 * from one older than BatchGetProducts is treated alike) is no outage:
 * INTERNAL at once, one call, no retry, nothing written. */
static void a_refused_call_is_internal_not_unavailable(void **state)
{
    ord_it_t *t = *state;
    it_item_t items[1] = {{"refuse-1", 1}};
    ord_it_counts_t before = ord_it_counts(t);
    it_created_t *c = NULL;
    rpc_result_t res;

    atomic_store(&fake.calls, 0);
    it_order_create(t->ord_ch, "cust-p", items, 1, NULL, 10000, &c, &res);
    IT_ASSERT_ERROR(
        res, SVC_EINTERNAL,
        "the catalog refused BatchGetProducts: INVALID_ARGUMENT ids must have 1-100 entries");
    assert_int_equal(atomic_load(&fake.calls), 1);
    ord_it_assert_counts(ord_it_counts(t), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(distinct_products_are_priced_in_one_call),
        cmocka_unit_test(an_unknown_product_is_named_and_nothing_written),
        cmocka_unit_test(a_wrong_answer_fails_the_order_without_a_write),
        cmocka_unit_test(a_refused_call_is_internal_not_unavailable),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests_name("order_pricing", tests, setup, teardown);
    cat_it_global_fini();
    return rc;
}
