/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_catalog_rpc.c - every CatalogService RPC against the real catalog
 * binary and Postgres: happy paths, every validation error, NOT_FOUND, and
 * pagination. Each test gets its own database and catalog process, so
 * counts and orders are exact; teardown also requires a clean exit 0 on
 * SIGTERM (in the ASan build: no leaks).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "catalog_it.h"

#define THAI_KO "\xe0\xb8\x81" /* U+0E01 THAI CHARACTER KO KAI: 3 bytes */

/* n copies of unit (a UTF-8 character), owned by caller (free()). */
static char *repeat(const char *unit, size_t n)
{
    size_t len = strlen(unit);
    char *s = malloc(n * len + 1);

    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        memcpy(s + i * len, unit, len);
    s[n * len] = '\0';
    return s;
}

static int64_t count_products(const cat_it_t *t)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    int64_t n = -1;

    if (pgtest_scalar_int(t->db.dsn, "SELECT count(*) FROM products", &n, errbuf) != SVC_OK)
        fail_msg("count(*): %s", errbuf);
    return n;
}

static void assert_same_product(const it_product_t *a, const it_product_t *b)
{
    assert_string_equal(a->id, b->id);
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->description, b->description);
    assert_true(a->price_cents == b->price_cents);
    assert_int_equal(a->stock, b->stock);
    assert_string_equal(a->created_at, b->created_at);
}

static it_product_t *create_ok(const cat_it_t *t, const char *name, const char *desc, int64_t price,
                               int32_t stock)
{
    it_product_t *p = NULL;
    rpc_result_t res;

    it_create(t->ch, name, desc, price, stock, 0, &p, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_non_null(p);
    return p;
}

static void create_get_list_roundtrip(void **state)
{
    cat_it_t *t = *state;
    it_product_t *p = NULL, *q = NULL, *g = NULL;
    it_list_t *l = NULL;
    rpc_result_t res;

    p = create_ok(t, "Espresso cup", "white porcelain, 90 ml", 1250, 7);
    assert_true(it_is_uuid(p->id));
    assert_string_equal(p->name, "Espresso cup");
    assert_string_equal(p->description, "white porcelain, 90 ml");
    assert_true(p->price_cents == 1250);
    assert_int_equal(p->stock, 7);
    if (!it_is_recent_rfc3339_utc(p->created_at, 300))
        fail_msg("created_at \"%s\" is not a current RFC 3339 UTC time", p->created_at);

    it_get(t->ch, p->id, 0, &g, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_same_product(p, g);

    /* The zero values are valid: free, out of stock, no description. */
    q = create_ok(t, "Gift card", "", 0, 0);
    assert_true(it_is_uuid(q->id));
    assert_string_not_equal(q->id, p->id);
    assert_true(q->price_cents == 0);
    assert_int_equal(q->stock, 0);
    assert_string_equal(q->description, "");

    it_list(t->ch, 0, "", 0, &l, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(l->n_products, 2);
    assert_same_product(l->products[0], p); /* creation order */
    assert_same_product(l->products[1], q);
    assert_string_equal(l->next_page_token, "");
    assert_int_equal(count_products(t), 2);

    it_free(p);
    it_free(q);
    it_free(g);
    it_free(l);
}

typedef struct bad_create {
    const char *what;
    const char *name, *description;
    int64_t price_cents;
    int32_t stock;
    const char *field; /* the status message must name it */
} bad_create_t;

static void create_rejects_invalid_fields(void **state)
{
    cat_it_t *t = *state;
    char *name201 = repeat("a", 201), *thai201 = repeat(THAI_KO, 201);
    char *desc2001 = repeat("d", 2001);
    const bad_create_t cases[] = {
        {"empty name", "", "", 100, 1, "name"},
        {"201-character name", name201, "", 100, 1, "name"},
        {"201-character Thai name", thai201, "", 100, 1, "name"},
        {"name that is not UTF-8", "caf\xe9", "", 100, 1, "name"},
        {"2001-character description", "ok", desc2001, 100, 1, "description"},
        {"price_cents -1", "ok", "", -1, 1, "price_cents"},
        {"price_cents INT64_MIN", "ok", "", INT64_MIN, 1, "price_cents"},
        {"stock -1", "ok", "", 100, -1, "stock"},
        {"stock INT32_MIN", "ok", "", 100, INT32_MIN, "stock"},
    };

    for (size_t i = 0; i < SVC_COUNTOF(cases); i++) {
        const bad_create_t *c = &cases[i];
        it_product_t *p = NULL;
        rpc_result_t res;

        print_message("  %s\n", c->what);
        it_create(t->ch, c->name, c->description, c->price_cents, c->stock, 0, &p, &res);
        IT_ASSERT_ERROR(res, SVC_EINVAL, c->field);
        assert_null(p);
    }
    /* Rejected before the database: nothing was written. */
    assert_int_equal(count_products(t), 0);
    free(name201);
    free(thai201);
    free(desc2001);
}

static void create_accepts_limits(void **state)
{
    cat_it_t *t = *state;
    char *name200 = repeat("a", 200), *thai200 = repeat(THAI_KO, 200);
    char *desc2000 = repeat(THAI_KO, 2000);
    char sql[160], errbuf[SVC_ERRBUF_LEN] = "";
    it_product_t *a = NULL, *th = NULL, *g = NULL, *d = NULL;
    int64_t chars = -1;
    rpc_result_t res;

    a = create_ok(t, name200, "", 1, 1);
    assert_string_equal(a->name, name200);

    /* 200 characters are 600 bytes here: the limit counts characters. */
    assert_int_equal(strlen(thai200), 600);
    th = create_ok(t, thai200, "", 1, 1);
    assert_string_equal(th->name, thai200);
    it_get(t->ch, th->id, 0, &g, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_memory_equal(g->name, thai200, 601);
    snprintf(sql, sizeof sql, "SELECT char_length(name) FROM products WHERE id = '%s'", th->id);
    assert_int_equal(pgtest_scalar_int(t->db.dsn, sql, &chars, errbuf), SVC_OK);
    assert_int_equal(chars, 200);

    d = create_ok(t, "long description", desc2000, INT64_MAX, INT32_MAX);
    assert_string_equal(d->description, desc2000);
    assert_true(d->price_cents == INT64_MAX);
    assert_int_equal(d->stock, INT32_MAX);
    assert_int_equal(count_products(t), 3);

    it_free(a);
    it_free(th);
    it_free(g);
    it_free(d);
    free(name200);
    free(thai200);
    free(desc2000);
}

static void list_rejects_invalid_requests(void **state)
{
    cat_it_t *t = *state;
    it_product_t *p1 = create_ok(t, "one", "", 1, 1), *p2 = create_ok(t, "two", "", 2, 2);
    it_list_t *l = NULL, *next = NULL;
    char token[128], cut[128], edited[128];
    const char *bad_tokens[] = {"not-a-token", "!!!!", "djE6MTox", cut, edited};
    const int32_t bad_sizes[] = {-1, INT32_MIN};
    rpc_result_t res;
    size_t n;

    for (size_t i = 0; i < SVC_COUNTOF(bad_sizes); i++) {
        it_list(t->ch, bad_sizes[i], "", 0, &l, &res);
        IT_ASSERT_ERROR(res, SVC_EINVAL, "page_size");
        assert_null(l);
    }

    /* A real token, then the same token cut short and with one character
     * changed: both must be refused, not silently start elsewhere. */
    it_list(t->ch, 1, "", 0, &l, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(l->n_products, 1);
    assert_string_equal(l->products[0]->id, p1->id);
    assert_true(strlen(l->next_page_token) > 1 && strlen(l->next_page_token) < sizeof token);
    snprintf(token, sizeof token, "%s", l->next_page_token);
    n = strlen(token);
    snprintf(cut, sizeof cut, "%.*s", (int)(n - 1), token);
    snprintf(edited, sizeof edited, "%s", token);
    edited[n - 1] = edited[n - 1] == 'A' ? 'B' : 'A';
    it_free(l);
    l = NULL;

    for (size_t i = 0; i < SVC_COUNTOF(bad_tokens); i++) {
        print_message("  page_token \"%s\"\n", bad_tokens[i]);
        it_list(t->ch, 1, bad_tokens[i], 0, &l, &res);
        IT_ASSERT_ERROR(res, SVC_EINVAL, "page_token");
        assert_null(l);
    }

    it_list(t->ch, 1, token, 0, &next, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(next->n_products, 1);
    assert_string_equal(next->products[0]->id, p2->id);
    assert_string_equal(next->next_page_token, "");

    it_free(next);
    it_free(p1);
    it_free(p2);
}

static void get_unknown_ids_are_not_found(void **state)
{
    cat_it_t *t = *state;
    it_product_t *p = create_ok(t, "kept", "", 5, 5), *g = NULL;
    char random_id[37];
    const char *ids[] = {random_id,
                         "does-not-exist",
                         "",
                         "'; DROP TABLE products;--",
                         "00000000-0000-0000-0000-00000000000g",
                         "00000000-0000-0000-0000-000000000000 "};
    rpc_result_t res;

    it_random_uuid(random_id);
    assert_true(it_is_uuid(random_id));
    assert_string_not_equal(random_id, p->id);
    for (size_t i = 0; i < SVC_COUNTOF(ids); i++) {
        print_message("  id \"%s\"\n", ids[i]);
        it_get(t->ch, ids[i], 0, &g, &res);
        IT_ASSERT_CODE(res, SVC_ENOTFOUND);
        assert_string_equal(res.message, "product not found");
        assert_null(g);
    }
    /* The table and the product survived the injection attempt. */
    assert_int_equal(count_products(t), 1);
    it_get(t->ch, p->id, 0, &g, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_same_product(p, g);
    it_free(g);
    it_free(p);
}

/* products[i] answers ids[i]: a product, or an empty one for an id that
 * names none (a malformed id included); duplicates are answered each. */
static void batch_get_answers_each_id_in_place(void **state)
{
    cat_it_t *t = *state;
    it_product_t *p1 = create_ok(t, "one", "", 100, 1), *p2 = create_ok(t, "two", "d", 200, 2);
    char random_id[37], upper[37], many[101][37];
    const char *ids[] = {p2->id, random_id, p1->id, "'; DROP TABLE products;--", p2->id, "", upper};
    const char *all[101];
    it_batch_t *b = NULL;
    rpc_result_t res;

    it_random_uuid(random_id);
    for (size_t i = 0; i < sizeof upper; i++)
        upper[i] = (char)toupper((unsigned char)p1->id[i]);
    it_batch_get(t->ch, ids, SVC_COUNTOF(ids), 0, &b, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(b->n_products, SVC_COUNTOF(ids));
    assert_same_product(p2, b->products[0]);
    assert_string_equal(b->products[1]->id, "");
    assert_same_product(p1, b->products[2]);
    assert_string_equal(b->products[3]->id, "");
    assert_same_product(p2, b->products[4]);
    assert_string_equal(b->products[5]->id, "");
    assert_same_product(p1, b->products[6]); /* a UUID in upper case names the same product */
    it_free(b);
    assert_int_equal(count_products(t), 2);

    /* 1..100 ids: 100 is served (the last one known), 0 and 101 are not. */
    for (size_t i = 0; i < 101; i++) {
        it_random_uuid(many[i]);
        all[i] = many[i];
    }
    all[99] = p1->id;
    it_batch_get(t->ch, all, 100, 0, &b, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(b->n_products, 100);
    assert_string_equal(b->products[0]->id, "");
    assert_same_product(p1, b->products[99]);
    it_free(b);
    it_batch_get(t->ch, all, 101, 0, &b, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "ids must have 1-100 entries (got 101)");
    it_batch_get(t->ch, all, 0, 0, &b, &res);
    IT_ASSERT_ERROR(res, SVC_EINVAL, "ids must have 1-100 entries (got 0)");
    assert_null(b);
    it_free(p1);
    it_free(p2);
}

#define N_PAGINATED 250

/* Walks every page with page_size and checks each product appears exactly
 * once, in creation order, and that only the last page has no token.
 * Returns the number of pages. */
static int walk(const cat_it_t *t, char ids[][37], int32_t page_size, int expect_per_page)
{
    char token[128] = "";
    int seen = 0, pages = 0;

    for (;;) {
        it_list_t *l = NULL;
        rpc_result_t res;
        bool last;

        it_list(t->ch, page_size, token, 0, &l, &res);
        IT_ASSERT_CODE(res, SVC_OK);
        pages++;
        last = l->next_page_token[0] == '\0';
        if (last)
            assert_int_equal(l->n_products, N_PAGINATED - seen);
        else
            assert_int_equal(l->n_products, expect_per_page);
        for (size_t i = 0; i < l->n_products; i++) {
            if (strcmp(l->products[i]->id, ids[seen]) != 0)
                fail_msg("page_size %d, page %d, item %zu: got %s (%s), want product #%d %s",
                         page_size, pages, i, l->products[i]->id, l->products[i]->name, seen,
                         ids[seen]);
            seen++;
        }
        assert_true(strlen(l->next_page_token) < sizeof token);
        snprintf(token, sizeof token, "%s", l->next_page_token);
        it_free(l);
        if (last)
            break;
        assert_true(pages <= N_PAGINATED); /* a token that never ends */
    }
    assert_int_equal(seen, N_PAGINATED);
    return pages;
}

static void pagination_over_250_products(void **state)
{
    cat_it_t *t = *state;
    static char ids[N_PAGINATED][37];
    it_list_t *l = NULL;
    rpc_result_t res;

    for (int i = 0; i < N_PAGINATED; i++) {
        char name[32];
        it_product_t *p;
        snprintf(name, sizeof name, "item-%03d", i);
        p = create_ok(t, name, "", i, i);
        snprintf(ids[i], sizeof ids[i], "%s", p->id);
        it_free(p);
    }
    assert_int_equal(count_products(t), N_PAGINATED);

    it_list(t->ch, 0, "", 0, &l, &res); /* 0: the default page size */
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(l->n_products, 50);
    assert_string_equal(l->products[0]->id, ids[0]);
    assert_string_equal(l->products[49]->id, ids[49]);
    assert_string_not_equal(l->next_page_token, "");
    it_free(l);

    it_list(t->ch, 1000, "", 0, &l, &res); /* capped at 200 */
    IT_ASSERT_CODE(res, SVC_OK);
    assert_int_equal(l->n_products, 200);
    assert_string_equal(l->products[199]->id, ids[199]);
    assert_string_not_equal(l->next_page_token, "");
    it_free(l);

    assert_int_equal(walk(t, ids, 7, 7), 36);     /* 35 full pages and 5 left */
    assert_int_equal(walk(t, ids, 50, 50), 5);    /* exact fit: no empty 6th page */
    assert_int_equal(walk(t, ids, 1000, 200), 2); /* 200 + 50 */
    assert_int_equal(walk(t, ids, 0, 50), 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(create_get_list_roundtrip, cat_it_setup, cat_it_teardown),
        cmocka_unit_test_setup_teardown(create_rejects_invalid_fields, cat_it_setup,
                                        cat_it_teardown),
        cmocka_unit_test_setup_teardown(create_accepts_limits, cat_it_setup, cat_it_teardown),
        cmocka_unit_test_setup_teardown(list_rejects_invalid_requests, cat_it_setup,
                                        cat_it_teardown),
        cmocka_unit_test_setup_teardown(get_unknown_ids_are_not_found, cat_it_setup,
                                        cat_it_teardown),
        cmocka_unit_test_setup_teardown(batch_get_answers_each_id_in_place, cat_it_setup,
                                        cat_it_teardown),
        cmocka_unit_test_setup_teardown(pagination_over_250_products, cat_it_setup,
                                        cat_it_teardown),
    };
    int failed;

    cat_it_global_init();
    failed = cmocka_run_group_tests_name("catalog_rpc", tests, NULL, NULL);
    cat_it_global_fini();
    return failed;
}
