/* SPDX-License-Identifier: Apache-2.0 */
/* test_reserve.c - the catalog's decision for an order, without a database
 * (services/catalog/reserve.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "reserve.h"

#define A     "0b5f4c1e-1d6a-4c6e-9a52-3f3e0e5f0a01"
#define B     "0b5f4c1e-1d6a-4c6e-9a52-3f3e0e5f0a02"
#define ORDER "7d1f7a36-0f77-4d83-8a77-0e4a1f1c9b10"

static cat_order_created_t make(Shopmicro__Events__V1__OrderLine *l,
                                Shopmicro__Events__V1__OrderLine **lp, const char *const *ids,
                                const int32_t *qty, size_t n)
{
    cat_order_created_t ev = SHOPMICRO__EVENTS__V1__ORDER_CREATED__INIT;

    for (size_t i = 0; i < n; i++) {
        shopmicro__events__v1__order_line__init(&l[i]);
        l[i].product_id = (char *)ids[i];
        l[i].quantity = qty[i];
        lp[i] = &l[i];
    }
    ev.order_id = (char *)ORDER;
    ev.n_items = n;
    ev.items = lp;
    return ev;
}

static void lines_merge_by_product_in_any_case(void **state)
{
    Shopmicro__Events__V1__OrderLine l[3], *lp[3];
    const char *ids[] = {A, B, "0B5F4C1E-1D6A-4C6E-9A52-3F3E0E5F0A01"};
    const int32_t qty[] = {2, 1, 3};
    cat_order_created_t ev = make(l, lp, ids, qty, 3);
    cat_line_t out[CAT_RESERVE_MAX_LINES];
    char reason[128];
    size_t n = 0;

    (void)state;
    assert_int_equal(cat_reserve_lines(&ev, out, &n, reason, sizeof reason), SVC_OK);
    assert_int_equal(n, 2);
    assert_string_equal(out[0].product_id, A); /* first appearance first, lower case */
    assert_int_equal(out[0].quantity, 5);
    assert_true(out[0].is_uuid);
    assert_string_equal(out[1].product_id, B);
}

static void events_that_can_never_be_served(void **state)
{
    Shopmicro__Events__V1__OrderLine l[2], *lp[2];
    const char *ids[] = {A, "x"};
    const int32_t bad_qty[] = {0, 1}, ok_qty[] = {1, 1}, huge[] = {CAT_RESERVE_MAX_QUANTITY, 1};
    const char *same[] = {A, A};
    cat_line_t out[CAT_RESERVE_MAX_LINES];
    char reason[128];
    size_t n;
    cat_order_created_t ev = make(l, lp, ids, bad_qty, 2);

    (void)state;
    assert_int_equal(cat_reserve_lines(&ev, out, &n, reason, sizeof reason), SVC_EINVAL);
    assert_non_null(strstr(reason, "quantity below 1"));
    ev = make(l, lp, same, huge, 2);
    assert_int_equal(cat_reserve_lines(&ev, out, &n, reason, sizeof reason), SVC_EINVAL);
    assert_non_null(strstr(reason, "quantity above"));
    ev = make(l, lp, ids, ok_qty, 0);
    assert_int_equal(cat_reserve_lines(&ev, out, &n, reason, sizeof reason), SVC_EINVAL);
    ev = make(l, lp, ids, ok_qty, 2);
    ev.order_id = (char *)"order-1";
    assert_int_equal(cat_reserve_lines(&ev, out, &n, reason, sizeof reason), SVC_EINVAL);
    assert_non_null(strstr(reason, "not a UUID"));
    /* A product id that is no UUID is a product nobody has, not poison. */
    ev = make(l, lp, ids, ok_qty, 2);
    assert_int_equal(cat_reserve_lines(&ev, out, &n, reason, sizeof reason), SVC_OK);
    assert_false(out[1].is_uuid);
}

static void shortages_name_every_line_that_fails(void **state)
{
    cat_line_t lines[3] = {{A, 5, true}, {B, 2, true}, {"nope", 1, false}};
    cat_stock_row_t rows[2] = {{A, 4}, {B, 2}};
    cat_shortage_t out[3];

    (void)state;
    assert_int_equal(cat_reserve_assess(lines, 3, rows, 2, out), 2);
    assert_string_equal(out[0].product_id, A);
    assert_int_equal(out[0].wanted, 5);
    assert_int_equal(out[0].available, 4);
    assert_false(out[0].unknown_product);
    assert_string_equal(out[1].product_id, "nope");
    assert_true(out[1].unknown_product);
    assert_int_equal(out[1].available, 0);
    /* Enough of everything: nothing short. Exactly the stock is enough. */
    lines[0].quantity = 4;
    assert_int_equal(cat_reserve_assess(lines, 2, rows, 2, out), 0);
    /* A UUID that no row has is unknown too. */
    assert_int_equal(cat_reserve_assess(lines, 2, rows, 1, out), 1);
    assert_true(out[0].unknown_product);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lines_merge_by_product_in_any_case),
        cmocka_unit_test(events_that_can_never_be_served),
        cmocka_unit_test(shortages_name_every_line_that_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
